"""The share-group admin APIs' share-partitions led by other processes (`--processes N`).

A share group's coordinator is node `crc32(group) % N`, but each share-partition's state lives
with its partition's leader (docs/multicore.md). So, as Kafka's group coordinator asks the
share coordinator through its persister (`DefaultStatePersister`), the coordinator sends the
per-partition part of DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups to each leader with the inter-broker share-state RPCs
of KIP-932: ReadShareGroupStateSummary (87), InitializeShareGroupState (83) and
DeleteShareGroupState (86), over the kept connection of `broker/node_link.py`; the leader
applies them with the code the coordinator uses for its own partitions
(`broker/share_state_peer.py`). N = 1 never comes here.

The nodes are asked at once, one request each (a slice of at most `CHUNK` partitions at a
time), and awaited: the loop serves others meanwhile. A leader that does not answer within
`ADMIN_TIMEOUT_S` (stopped) or refuses the connection (down) is COORDINATOR_NOT_AVAILABLE for
its partitions: the error Kafka's persister ends with when it cannot reach the share
coordinator (`PersisterStateManager`: COORDINATOR_NOT_AVAILABLE is retriable, and once its
attempts are spent the partition's result carries it), so an admin client may try again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import structlog
from kio.schema.delete_share_group_state import v0 as delete_v0
from kio.schema.errors import ErrorCode
from kio.schema.initialize_share_group_state import v0 as init_v0
from kio.schema.read_share_group_state_summary import v1 as summary_v1
from kio.static.primitive import i32
from kio.static.primitive import i64
from kio.static.protocol import RequestPayload

from broker.context import BrokerServices
from broker.share.share_group_offsets import PartitionOffsets
from broker.slicing import Slicer
from storage.topics import TopicInfo

log = structlog.get_logger("shoal.groups")

# Under librdkafka's admin `request.timeout.ms` (30 s) with room to spare: a leader that is down
# is reported while the admin client still waits for the answer.
ADMIN_TIMEOUT_S = 5.0
CHUNK = 1000  # partitions per request: encoding one stays well under the loop's 50 ms

Partition = tuple[TopicInfo, int]
Key = tuple[uuid.UUID, int]  # (topic id, partition): what the RPCs name


def led_elsewhere(s: BrokerServices, topic: TopicInfo, partition: int) -> bool:
    """Whether another process leads this partition (never with N = 1)."""
    return s.node_links is not None and not s.config.ownership.leads(topic.topic_id, partition)


async def partitions_led_elsewhere(s: BrokerServices) -> list[Partition]:
    """Every partition of every topic that another process leads (the ones a share group
    may have state on without this process knowing it); a slice at a time."""
    if s.node_links is None:
        return []
    owner, slicer = s.config.ownership, Slicer()
    out: list[Partition] = []
    for t in sorted(s.logs.topics(), key=lambda t: t.name):
        for p in range(t.partitions):
            if not owner.leads(t.topic_id, p):
                out.append((t, p))
            await slicer.pause()
    return out


async def _by_node(s: BrokerServices, parts: Iterable[Partition]) -> dict[int, list[Partition]]:
    owner, slicer = s.config.ownership, Slicer()
    nodes: dict[int, list[Partition]] = {}
    for topic, p in parts:
        nodes.setdefault(owner.leader(topic.topic_id, p), []).append((topic, p))
        await slicer.pause()
    return nodes


def _topics(
    parts: list[Partition], entry: Callable[[Partition], Any]
) -> dict[uuid.UUID, list[Any]]:
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for part in parts:
        by_topic.setdefault(part[0].topic_id, []).append(entry(part))
    return by_topic


async def _ask(
    s: BrokerServices,
    parts: Iterable[Partition],
    build: Callable[[list[Partition]], RequestPayload],
    read: Callable[[Any], Iterable[tuple[Key, Any]]],
) -> dict[Key, Any]:
    """Each leader's answer for its partitions, by (topic id, partition); an unreachable
    leader's partitions are COORDINATOR_NOT_AVAILABLE, a partition it left out
    UNKNOWN_SERVER_ERROR."""
    links = s.node_links
    assert links is not None

    async def one_node(node: int, mine: list[Partition]) -> dict[Key, Any]:
        out: dict[Key, Any] = {}
        for i in range(0, len(mine), CHUNK):
            chunk = mine[i : i + CHUNK]
            try:
                answer = await links.request(node, build(chunk), ADMIN_TIMEOUT_S)
            except (OSError, TimeoutError) as e:
                log.warning("share-state request to a node failed", node=node,
                            error=type(e).__name__)  # fmt: skip
                return out | {(t.topic_id, p): ErrorCode.coordinator_not_available
                              for t, p in mine[i:]}  # fmt: skip
            out.update(read(answer))
            for t, p in chunk:
                out.setdefault((t.topic_id, p), ErrorCode.unknown_server_error)
            await asyncio.sleep(0)  # a chunk at a time: others are served between
        return out

    nodes = await _by_node(s, parts)
    results: dict[Key, Any] = {}
    for answer in await asyncio.gather(*(one_node(n, mine) for n, mine in nodes.items())):
        results.update(answer)
    return results


async def summaries(
    s: BrokerServices, group_id: str, parts: Iterable[Partition]
) -> dict[Key, PartitionOffsets | ErrorCode]:
    """Each partition's offsets as its leader describes them (SPSO -1: never started), or
    the error that kept it from answering."""
    m = summary_v1.request

    def build(chunk: list[Partition]) -> RequestPayload:
        by_topic = _topics(chunk, lambda tp: m.PartitionData(partition=i32(tp[1]),
                                                             leader_epoch=i32(0)))  # fmt: skip
        return summary_v1.ReadShareGroupStateSummaryRequest(
            group_id=group_id,
            topics=tuple(m.ReadStateSummaryData(topic_id=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        )  # fmt: skip

    def read(answer: Any) -> Iterable[tuple[Key, PartitionOffsets | ErrorCode]]:
        for t in answer.results:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    yield (t.topic_id, p.partition), ErrorCode(p.error_code)
                else:
                    offsets = PartitionOffsets.from_summary(p.start_offset, p.error_message)
                    yield (t.topic_id, p.partition), offsets

    return await _ask(s, parts, build, read)


def _codes(answer: Any) -> Iterable[tuple[Key, ErrorCode]]:
    for t in answer.results:
        for p in t.partitions:
            yield (t.topic_id, p.partition), ErrorCode(p.error_code)


async def resets(
    s: BrokerServices, group_id: str, parts: list[Partition], starts: dict[Key, int]
) -> dict[Key, ErrorCode]:
    """Start each share-partition at its offset in `starts` (InitializeShareGroupState), on
    its leader."""
    m = init_v0.request

    def build(chunk: list[Partition]) -> RequestPayload:
        by_topic = _topics(chunk, lambda tp: m.PartitionData(partition=i32(tp[1]),
            state_epoch=i32(0), start_offset=i64(starts[(tp[0].topic_id, tp[1])])))  # fmt: skip
        return init_v0.InitializeShareGroupStateRequest(
            group_id=group_id,
            topics=tuple(m.InitializeStateData(topic_id=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        )  # fmt: skip

    return await _ask(s, parts, build, _codes)


async def deletes(
    s: BrokerServices, group_id: str, parts: Iterable[Partition]
) -> dict[Key, ErrorCode]:
    """Forget each share-partition (DeleteShareGroupState) on its leader; one never started
    is nothing to do there."""
    m = delete_v0.request

    def build(chunk: list[Partition]) -> RequestPayload:
        by_topic = _topics(chunk, lambda tp: m.PartitionData(partition=i32(tp[1])))
        return delete_v0.DeleteShareGroupStateRequest(
            group_id=group_id,
            topics=tuple(m.DeleteStateData(topic_id=t, partitions=tuple(ps))
                         for t, ps in by_topic.items()),
        )  # fmt: skip

    return await _ask(s, parts, build, _codes)
