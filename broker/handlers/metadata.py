"""Metadata (3): this broker, and topics by name or by id (share consumers look up by id).

v0-13, as Kafka 4 serves (MetadataRequest.json; KIP-896 removed none). v8-10 carry
ClusterAuthorizedOperations, which v11 removed, so v0-10 are answered with v10's classes and
v11-13 with v13's (where a topic's name may be null: an unknown topic id; v13 adds a top-level
error code, KIP-1102). In v0 an empty topic list asks for every topic; from v1 that is a null
list, and an empty one asks for none.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from typing import cast

from kio.schema.errors import ErrorCode
from kio.schema.metadata import v0
from kio.schema.metadata import v1
from kio.schema.metadata import v2
from kio.schema.metadata import v3
from kio.schema.metadata import v4
from kio.schema.metadata import v5
from kio.schema.metadata import v6
from kio.schema.metadata import v7
from kio.schema.metadata import v8
from kio.schema.metadata import v9
from kio.schema.metadata import v10
from kio.schema.metadata import v11
from kio.schema.metadata import v12
from kio.schema.metadata import v13
from kio.schema.types import BrokerId
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.authorization import authorize_cluster
from broker.authorization import authorized_operations
from broker.authorized_operations import CLUSTER_OPERATIONS
from broker.authorized_operations import NOT_REQUESTED
from broker.authorized_operations import TOPIC_OPERATIONS
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import topic_or_create
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import CLUSTER_NAME
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.messages import build
from storage.topics import TopicInfo

DESCRIBE, CREATE = AclOperation.DESCRIBE, AclOperation.CREATE
TOPIC = ResourceType.TOPIC

Request = (
    v0.MetadataRequest
    | v1.MetadataRequest
    | v2.MetadataRequest
    | v3.MetadataRequest
    | v4.MetadataRequest
    | v5.MetadataRequest
    | v6.MetadataRequest
    | v7.MetadataRequest
    | v8.MetadataRequest
    | v9.MetadataRequest
    | v10.MetadataRequest
    | v11.MetadataRequest
    | v12.MetadataRequest
    | v13.MetadataRequest
)
OLDER_THAN_V4 = (v0.MetadataRequest, v1.MetadataRequest, v2.MetadataRequest, v3.MetadataRequest)
OLDER_THAN_V8 = (
    *OLDER_THAN_V4, v4.MetadataRequest, v5.MetadataRequest, v6.MetadataRequest, v7.MetadataRequest,
)  # fmt: skip
ById = (
    v10.request.MetadataRequestTopic
    | v11.request.MetadataRequestTopic
    | v12.request.MetadataRequestTopic
    | v13.request.MetadataRequestTopic
)


@dataclass(frozen=True, slots=True)
class _Topic:
    """One topic of the answer, whatever the version."""

    code: ErrorCode
    name: str | None
    topic_id: uuid.UUID | None
    partitions: int = 0

    @classmethod
    def of(cls, topic: TopicInfo) -> _Topic:
        return cls(ErrorCode.none, topic.name, topic.topic_id, topic.partitions)


async def _topics(ctx: RequestContext, request: Request, slicer: Slicer) -> list[_Topic]:
    logs = ctx.services.logs
    allow_create = True if isinstance(request, OLDER_THAN_V4) else request.allow_auto_topic_creation
    every = request.topics is None or (
        isinstance(request, v0.MetadataRequest) and not request.topics
    )
    if every:  # all topics: those it may not describe are left out
        logs.refresh_topics()  # with --processes N: what the controller made since (a stat)
        described = await slicer.map(
            lambda t: _Topic.of(t) if authorize(ctx, DESCRIBE, TOPIC, t.name) else None,
            logs.topics(),
        )
        return [t for t in described if t is not None]
    out = []
    for wanted in request.topics or ():
        name = wanted.name
        topic_id = wanted.topic_id if isinstance(wanted, ById) else None
        if name is None and topic_id is not None and topic_id.int != 0:
            out.append(_by_id(ctx, topic_id))
        else:
            out.append(await _by_name(ctx, name or "", topic_id, allow_create))
        await slicer.pause()
    return out


def _by_id(ctx: RequestContext, topic_id: uuid.UUID) -> _Topic:
    found = ctx.services.logs.topic_by_id(topic_id)
    if found is None and ctx.services.logs.refresh_topics():  # made by the controller since
        found = ctx.services.logs.topic_by_id(topic_id)
    if found is None:
        return _Topic(ErrorCode.unknown_topic_id, None, topic_id)
    if not authorize(ctx, DESCRIBE, TOPIC, found.name):  # the name stays hidden, as in Kafka
        return _Topic(ErrorCode.topic_authorization_failed, None, topic_id)
    return _Topic.of(found)


async def _by_name(
    ctx: RequestContext, name: str, topic_id: uuid.UUID | None, allow_create: bool
) -> _Topic:
    if not authorize(ctx, DESCRIBE, TOPIC, name):
        return _Topic(ErrorCode.topic_authorization_failed, name, topic_id)
    # Auto-creation needs CREATE on the cluster or the topic, as CreateTopics does.
    may_create = allow_create and (
        authorize_cluster(ctx, CREATE) or authorize(ctx, CREATE, TOPIC, name)
    )
    topic, code = await topic_or_create(ctx, name, may_create)
    if topic is not None:
        return _Topic.of(topic)
    if allow_create and not may_create and ctx.services.config.auto_create_topics_enable:
        code = ErrorCode.topic_authorization_failed
    return _Topic(code, name, topic_id)


Partition = TypeVar(
    "Partition", v10.response.MetadataResponsePartition, v13.response.MetadataResponsePartition
)


@functools.lru_cache(maxsize=256)
def _partitions(cls: type[Partition], first: int, nodes: int, count: int) -> tuple[Partition, ...]:
    """A topic's partitions, partition i led by node (first + i) % nodes, its only replica
    (`broker.ownership`; one process: `first` is its node id and `nodes` 1): the same entries
    for every topic of `count` partitions with the same first leader (immutable, so shared
    between answers: a topic of 10,000 partitions is not rebuilt per request)."""

    def leader(i: int) -> BrokerId:
        return BrokerId(first if nodes == 1 else (first + i) % nodes)

    return tuple(
        cls(
            error_code=ErrorCode.none,
            partition_index=i32(i),
            leader_id=leader(i),
            leader_epoch=i32(0),
            replica_nodes=(leader(i),),
            isr_nodes=(leader(i),),
        )
        for i in range(count)
    )


Broker = TypeVar("Broker", v10.response.MetadataResponseBroker, v13.response.MetadataResponseBroker)


def _brokers(ctx: RequestContext, cls: type[Broker]) -> tuple[Broker, ...]:
    """This broker, or with `--processes N` all N, each at the client's listener's port moved
    by the node id (the host is the same)."""
    owner = ctx.services.config.ownership
    host, port = ctx.endpoint  # of the listener the client connected to
    if owner.single:
        return (cls(node_id=BrokerId(ctx.services.node_id), host=host, port=i32(port)),)
    return tuple(
        cls(node_id=BrokerId(n), host=host, port=i32(owner.port_of(n, port)))
        for n in owner.node_ids()
    )


TopicOps = Callable[[_Topic], i32]


async def _answer_v13(
    ctx: RequestContext, topics: list[_Topic], topic_ops: TopicOps, slicer: Slicer
) -> v13.MetadataResponse:
    s, r = ctx.services, v13.response
    owner = s.config.ownership
    answered = await slicer.map(
        lambda t: r.MetadataResponseTopic(
            error_code=t.code,
            name=None if t.name is None else TopicName(t.name),
            topic_id=t.topic_id,
            partitions=_partitions(
                r.MetadataResponsePartition,
                owner.first_leader(t.topic_id),
                owner.nodes,
                t.partitions,
            ),
            topic_authorized_operations=topic_ops(t),
        ),
        topics,
    )
    return v13.MetadataResponse(
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        brokers=_brokers(ctx, r.MetadataResponseBroker),
        cluster_id=s.cluster_id,
        controller_id=BrokerId(owner.controller_id),
        topics=tuple(answered),
    )


async def _answer_v10(
    ctx: RequestContext, topics: list[_Topic], topic_ops: TopicOps, cluster_ops: i32,
    slicer: Slicer,
) -> v10.MetadataResponse:  # fmt: skip
    s, r = ctx.services, v10.response
    owner = s.config.ownership
    answered = await slicer.map(
        lambda t: r.MetadataResponseTopic(
            error_code=t.code,
            name=TopicName(t.name or ""),  # not nullable before v12
            topic_id=t.topic_id,
            partitions=_partitions(
                r.MetadataResponsePartition,
                owner.first_leader(t.topic_id),
                owner.nodes,
                t.partitions,
            ),
            topic_authorized_operations=topic_ops(t),
        ),
        topics,
    )
    return v10.MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=_brokers(ctx, r.MetadataResponseBroker),
        cluster_id=s.cluster_id,
        controller_id=BrokerId(owner.controller_id),
        topics=tuple(answered),
        cluster_authorized_operations=cluster_ops,
    )


def _names_a_topic_by_id(request: Request) -> bool:
    """Whether a v10 or v11 request names a topic by id or leaves a name null, which only
    v12 may (Kafka's KafkaApis.handleTopicMetadataRequest: "Topic name can not be null for
    version", "Topic IDs are not supported in requests for version")."""
    if not isinstance(request, (v10.MetadataRequest, v11.MetadataRequest)) or not request.topics:
        return False
    return any(t.name is None or t.topic_id is not None for t in request.topics)


async def _invalid(request: Request, slicer: Slicer) -> v10.MetadataResponse | v13.MetadataResponse:
    """Kafka's answer to such a request (MetadataRequest.getErrorResponse): every topic asked
    for with INVALID_REQUEST, a null name as "", and no brokers. In slices: a request may name
    300,000 topics, and each costs tens of microseconds."""
    wire = v13 if isinstance(request, v11.MetadataRequest) else v10  # v11 has v13's classes

    def refused(t: ById) -> object:
        return build(
            wire.response.MetadataResponseTopic,
            error_code=ErrorCode.invalid_request,
            name=t.name or "",
            topic_id=t.topic_id,
            partitions=(),
        )

    topics = tuple(await slicer.map(refused, cast(tuple[ById, ...], request.topics or ())))
    answer = {"throttle_time": NO_THROTTLE, "brokers": (), "cluster_id": None, "topics": topics}
    if wire is v13:
        return build(v13.MetadataResponse, controller_id=-1, **answer)
    return build(v10.MetadataResponse, controller_id=-1, **answer)


async def handle(
    ctx: RequestContext, request: Request
) -> v10.MetadataResponse | v13.MetadataResponse:
    slicer = Slicer()  # a request may name 300,000 topics
    if _names_a_topic_by_id(request):
        return await _invalid(request, slicer)
    topics = await _topics(ctx, request, slicer)
    cluster_ops = NOT_REQUESTED
    if (
        isinstance(request, (v8.MetadataRequest, v9.MetadataRequest, v10.MetadataRequest))
        and request.include_cluster_authorized_operations
    ):
        cluster_ops = authorized_operations(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS
        )
    with_ops = (
        not isinstance(request, OLDER_THAN_V8) and request.include_topic_authorized_operations
    )

    def topic_ops(t: _Topic) -> i32:
        if not with_ops or t.name is None or t.code != ErrorCode.none:
            return NOT_REQUESTED
        return authorized_operations(ctx, TOPIC, t.name, TOPIC_OPERATIONS)

    if isinstance(request, (v11.MetadataRequest, v12.MetadataRequest, v13.MetadataRequest)):
        return await _answer_v13(ctx, topics, topic_ops, slicer)
    return await _answer_v10(ctx, topics, topic_ops, cluster_ops, slicer)


HANDLER = handler(
    handle,
    v0.MetadataRequest,
    v1.MetadataRequest,
    v2.MetadataRequest,
    v3.MetadataRequest,
    v4.MetadataRequest,
    v5.MetadataRequest,
    v6.MetadataRequest,
    v7.MetadataRequest,
    v8.MetadataRequest,
    v9.MetadataRequest,
    v10.MetadataRequest,
    v11.MetadataRequest,
    v12.MetadataRequest,
    v13.MetadataRequest,
    responses=(v10.MetadataResponse, v13.MetadataResponse),
    acl=((DESCRIBE, TOPIC), (CREATE, ResourceType.CLUSTER), (CREATE, TOPIC)),
)
