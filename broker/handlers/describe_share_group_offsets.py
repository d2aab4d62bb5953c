"""DescribeShareGroupOffsets (90): SPSO per share-partition, and (v1, Kafka 4.2) its lag.

With Topics null every initialised share-partition of the group is described; a named
partition the group never started answers StartOffset -1 and Lag -1, as Kafka does. On
success the partition's ErrorMessage carries Shoal's extra detail (SPEO and in-flight counts
by state) as `key=value` words; Kafka's clients ignore an error message without an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.describe_share_group_offsets import v0
from kio.schema.describe_share_group_offsets import v1
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker import share_admin_remote as remote
from broker.authorization import authorize
from broker.context import RequestContext
from broker.errors import BrokerException
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_COORDINATOR_MESSAGE
from broker.handlers.common import not_coordinator
from broker.lag_readings import learn_non_data
from broker.registry import handler
from broker.share.share_group_offsets import PartitionOffsets
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.topics import TopicInfo

DESCRIBE, TOPIC = AclOperation.DESCRIBE, ResourceType.TOPIC

Request = v0.DescribeShareGroupOffsetsRequest | v1.DescribeShareGroupOffsetsRequest
RequestTopic = (
    v0.request.DescribeShareGroupOffsetsRequestTopic
    | v1.request.DescribeShareGroupOffsetsRequestTopic
)
Partition = v1.response.DescribeShareGroupOffsetsResponsePartition
Topic = v1.response.DescribeShareGroupOffsetsResponseTopic
Group = v1.response.DescribeShareGroupOffsetsResponseGroup


def _partition(index: int, code: ErrorCode, offsets: PartitionOffsets | None = None) -> Partition:
    if offsets is None:
        return Partition(
            partition_index=i32(index),
            start_offset=i64(-1),
            leader_epoch=i32(-1),
            lag=i64(-1),
            error_code=code,
        )
    return Partition(
        partition_index=i32(index),
        start_offset=i64(offsets.start_offset),
        leader_epoch=i32(0),
        lag=i64(offsets.lag),
        error_code=code,
        error_message=offsets.extension() if offsets.start_offset >= 0 else None,
    )


class _Unreachable(BrokerException):
    """A leader did not answer a describe of all the group's topics: the answer would miss
    its partitions, so the group gets the error (COORDINATOR_NOT_AVAILABLE)."""

    def __init__(self, code: ErrorCode) -> None:
        self.code = code


async def _started_elsewhere(
    ctx: RequestContext, group_id: str
) -> dict[tuple[str, int], Partition]:
    """`--processes N`, all the group's topics: the share-partitions other processes lead and
    the group started, described by their leaders."""
    s = ctx.services
    parts = await remote.partitions_led_elsewhere(s)
    if not parts:
        return {}
    answers = await remote.summaries(s, group_id, parts)
    out = {}
    slicer = Slicer()  # every partition of every topic: may be a million
    for topic, p in parts:
        await slicer.pause()
        got = answers[(topic.topic_id, p)]
        if isinstance(got, ErrorCode):
            if got in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_coordinator):
                continue  # deleted, or led elsewhere since: nothing the group holds there
            raise _Unreachable(got)
        if got.start_offset >= 0:
            out[(topic.name, p)] = _partition(p, ErrorCode.none, got)
    return out


async def _requested(
    ctx: RequestContext,
    offsets: ShareGroupOffsets,
    group_id: str,
    wanted: Sequence[RequestTopic] | None,
) -> tuple[list[tuple[str, list[int]]], dict[tuple[str, int], Partition]]:
    """The (topic, partitions) to describe, and those described already (other processes'
    share-partitions of the group, when all its topics are asked for)."""
    if wanted is not None:
        return [(t.topic_name, list(t.partitions)) for t in wanted], {}
    by_topic: dict[str, list[int]] = {}
    for topic, p in offsets.partitions(group_id):
        by_topic.setdefault(topic.name, []).append(p)
    described = await _started_elsewhere(ctx, group_id)
    for name, p in sorted(described):
        by_topic.setdefault(name, []).append(p)
    # All the group's topics: those the principal may not DESCRIBE are left out.
    return [(n, ps) for n, ps in by_topic.items() if authorize(ctx, DESCRIBE, TOPIC, n)], described


async def _described_elsewhere(
    ctx: RequestContext,
    group_id: str,
    elsewhere: dict[tuple[str, int], tuple[TopicInfo, int]],
    described: dict[tuple[str, int], Partition],
) -> None:
    """The rows of share-partitions other processes lead, as their leaders describe them."""
    answers = await remote.summaries(ctx.services, group_id, elsewhere.values())
    for key, (info, p) in elsewhere.items():
        got = answers[(info.topic_id, p)]
        described[key] = (
            _partition(p, got) if isinstance(got, ErrorCode) else _partition(p, ErrorCode.none, got)
        )


async def _topics(
    ctx: RequestContext, group_id: str, wanted: Sequence[RequestTopic] | None, slicer: Slicer
) -> tuple[Topic, ...]:
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    logs = ctx.services.logs
    requested, described = await _requested(ctx, offsets, group_id, wanted)
    elsewhere: dict[tuple[str, int], tuple[TopicInfo, int]] = {}  # led by other processes
    out = []
    for name, partitions in requested:
        info = logs.topic(name)
        denied = not authorize(ctx, DESCRIBE, TOPIC, name)
        rows: list[Partition | tuple[str, int]] = []
        for p in partitions:
            if denied:
                rows.append(_partition(p, ErrorCode.topic_authorization_failed))
            elif info is None or not 0 <= p < info.partitions:
                rows.append(_partition(p, ErrorCode.unknown_topic_or_partition))
            elif (row := described.get((name, p))) is not None:
                rows.append(row)
            elif remote.led_elsewhere(s, info, p):
                elsewhere[(name, p)] = (info, p)
                rows.append((name, p))  # filled in once its leader answered
            else:
                plog = logs.log(name, p)
                if plog is not None:  # a segment sealed before non-data ranges were kept
                    await learn_non_data(plog)
                row = _partition(p, ErrorCode.none, offsets.describe(group_id, info, p))
                rows.append(described.setdefault((name, p), row))
            await slicer.pause()
        out.append((name, info if info and not denied else None, rows))
    if elsewhere:
        await _described_elsewhere(ctx, group_id, elsewhere, described)
    return tuple(
        Topic(
            topic_name=TopicName(name),
            topic_id=info.topic_id if info else None,
            partitions=tuple(described[r] if isinstance(r, tuple) else r for r in rows),
        )
        for name, info, rows in out
    )


async def handle(ctx: RequestContext, request: Request) -> v1.DescribeShareGroupOffsetsResponse:
    admin = ctx.services.share_group_admin
    groups = []
    slicer = Slicer()  # a request may name a million groups, or partitions
    for g in request.groups:
        await slicer.pause()
        if not authorize(ctx, DESCRIBE, ResourceType.GROUP, g.group_id):
            groups.append(
                Group(
                    group_id=g.group_id,
                    topics=(),
                    error_code=ErrorCode.group_authorization_failed,
                    error_message="no DESCRIBE on the group",
                )
            )
            continue
        if g.group_id and not_coordinator(ctx, g.group_id):
            groups.append(
                Group(
                    group_id=g.group_id,
                    topics=(),
                    error_code=ErrorCode.not_coordinator,
                    error_message=NOT_COORDINATOR_MESSAGE,
                )
            )
            continue
        if not g.group_id or admin.group(g.group_id) is None:
            code = ErrorCode.invalid_group_id if not g.group_id else ErrorCode.group_id_not_found
            groups.append(
                Group(
                    group_id=g.group_id,
                    topics=(),
                    error_code=code,
                    error_message=f"no share group {g.group_id!r}",
                )
            )
            continue
        try:
            topics = await _topics(ctx, g.group_id, g.topics, slicer)
        except _Unreachable as e:
            groups.append(Group(group_id=g.group_id, topics=(), error_code=e.code,
                                error_message="a partition leader did not answer"))  # fmt: skip
            continue
        groups.append(Group(group_id=g.group_id, topics=topics, error_code=ErrorCode.none))
    return v1.DescribeShareGroupOffsetsResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))


HANDLER = handler(
    handle,
    v0.DescribeShareGroupOffsetsRequest,
    v1.DescribeShareGroupOffsetsRequest,
    acl=((DESCRIBE, ResourceType.GROUP), (DESCRIBE, TOPIC)),
)
