"""What the share-state RPCs (KIP-932: InitializeShareGroupState 83, DeleteShareGroupState 86,
ReadShareGroupStateSummary 87) check on the node that receives them (`--processes N`).

In Kafka these are inter-broker requests: the group coordinator's persister sends them to the
share coordinator, and `KafkaApis` answers CLUSTER_AUTHORIZATION_FAILED for each partition
unless the sender has CLUSTER_ACTION on the cluster (`handleInitializeShareGroupStateRequest`
and its siblings). Between Shoal's processes the group's coordinator sends them to each
partition's leader (`broker/share_admin_remote.py`), which applies them to its share-partitions
with the code the coordinator uses for its own.

With an authorizer the sender needs CLUSTER_ACTION, as in Kafka (the processes have it: a
super user on a SASL_PLAINTEXT inter-node listener, `broker/node_identity.py`). Without one,
CLUSTER_ACTION alone would let any client through (as Kafka with no authorizer does), so a
request is also taken only when N > 1 and its client id names another node of the set
(`shoal-node-<k>`, k in 0..N-1, not this one), as `broker/node_link.py` sends them; anything
else gets CLUSTER_AUTHORIZATION_FAILED. Without an authorizer that is identification, not
proof: a client on the host that names itself a node gets through, and can then do no more
than the admin APIs (AlterShareGroupOffsets, DeleteShareGroupOffsets) already let any client
do without an authorizer. Each partition is still checked: a topic id unknown
here or a partition out of range is UNKNOWN_TOPIC_OR_PARTITION, one another node leads
NOT_COORDINATOR (Kafka's share coordinator answers so for a key whose shard is elsewhere), a
negative start offset INVALID_REQUEST, an empty group id INVALID_REQUEST for every partition
(`ShareCoordinatorService`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Iterable
from typing import Protocol
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.node_link import NODE_CLIENT_PREFIX
from broker.slicing import Slicer
from protocol.acl import AclOperation
from storage.topics import TopicInfo

P = TypeVar("P")  # a partition entry of the request
P_co = TypeVar("P_co", covariant=True)
R = TypeVar("R")  # a partition's answer
T = TypeVar("T")  # a topic's answer


class StateTopic(Protocol[P_co]):
    """A topic entry of a share-state RPC: its id and the partitions it names."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def partitions(self) -> tuple[P_co, ...]: ...


def from_peer(ctx: RequestContext) -> bool:
    """Whether the request comes from another node of this `--processes N` set."""
    owner = ctx.services.config.ownership
    if owner.single or not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return False
    client_id = ctx.header.client_id or ""
    if not client_id.startswith(NODE_CLIENT_PREFIX):
        return False
    node = client_id[len(NODE_CLIENT_PREFIX) :]
    return node.isdigit() and int(node) in owner.node_ids() and int(node) != owner.node_id


def led_partition(
    ctx: RequestContext, topic_id: uuid.UUID | None, partition: int
) -> tuple[TopicInfo | None, ErrorCode]:
    """The topic when this node leads the partition, else the error for it."""
    logs = ctx.services.logs
    topic = logs.topic_by_id(topic_id) if topic_id is not None else None
    if topic is None and topic_id is not None and logs.refresh_topics():  # made a moment ago
        topic = logs.topic_by_id(topic_id)
    if topic is None or not 0 <= partition < topic.partitions:
        return None, ErrorCode.unknown_topic_or_partition
    if not ctx.services.config.ownership.leads(topic.topic_id, partition):
        return None, ErrorCode.not_coordinator
    return topic, ErrorCode.none


async def per_partition(
    topics: Iterable[StateTopic[P]],
    answer: Callable[[uuid.UUID | None, P], Awaitable[R]],
    topic_result: Callable[[uuid.UUID | None, tuple[R, ...]], T],
) -> tuple[T, ...]:
    """Every partition the request names answered by `answer`, in the request's order, a slice
    at a time (a request may name a million partitions); each topic's answers made into its
    result by `topic_result`."""
    slicer = Slicer()
    results = []
    for t in topics:
        rows = []
        for p in t.partitions:
            rows.append(await answer(t.topic_id, p))
            await slicer.pause()
        results.append(topic_result(t.topic_id, tuple(rows)))
    return tuple(results)


async def per_partition_code(
    allowed: bool,
    topics: Iterable[StateTopic[P]],
    code: Callable[[uuid.UUID | None, P], ErrorCode],
    row: Callable[[P, ErrorCode], R],
    topic_result: Callable[[uuid.UUID | None, tuple[R, ...]], T],
) -> tuple[T, ...]:
    """`per_partition` for the RPCs that answer a partition with an error code: `code`'s, or
    CLUSTER_AUTHORIZATION_FAILED unless the request is `allowed` (`from_peer`)."""

    async def answer(topic_id: uuid.UUID | None, p: P) -> R:
        return row(p, code(topic_id, p) if allowed else ErrorCode.cluster_authorization_failed)

    return await per_partition(topics, answer, topic_result)
