"""OffsetFetch (9): a consumer group's committed offsets, from memory (`OffsetStore`).

A partition without a committed offset answers -1, so a consumer starts from
`auto.offset.reset`, as a new group does in Kafka. Null topics ask for every partition the
group has committed. v1-7 name one group (v7's classes); v8+ carry a list of groups (v9's
classes); v9's member id and epoch (KIP-848 consumers) are not checked yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol
from typing import TypeVar
from typing import cast

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch import v1
from kio.schema.offset_fetch import v2
from kio.schema.offset_fetch import v3
from kio.schema.offset_fetch import v4
from kio.schema.offset_fetch import v5
from kio.schema.offset_fetch import v6
from kio.schema.offset_fetch import v7
from kio.schema.offset_fetch import v8
from kio.schema.offset_fetch import v9
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType

OneGroup = (
    v1.OffsetFetchRequest | v2.OffsetFetchRequest | v3.OffsetFetchRequest
    | v4.OffsetFetchRequest | v5.OffsetFetchRequest | v6.OffsetFetchRequest
    | v7.OffsetFetchRequest
)  # fmt: skip
Request = OneGroup | v8.OffsetFetchRequest | v9.OffsetFetchRequest
_NO_REQUIRE_STABLE = (
    v1.OffsetFetchRequest,
    v2.OffsetFetchRequest,
    v3.OffsetFetchRequest,
    v4.OffsetFetchRequest,
    v5.OffsetFetchRequest,
    v6.OffsetFetchRequest,
)  # fmt: skip  (KIP-447: v7)
NO_OFFSET = -1


Asked = list[tuple[str, list[int]]]
Row = TypeVar(
    "Row", v7.response.OffsetFetchResponsePartition, v9.response.OffsetFetchResponsePartitions
)
Answer = list[tuple[str, tuple[Row, ...]]]


class Topic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


def _topic_code(ctx: RequestContext, topic: str) -> ErrorCode:
    if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
        return ErrorCode.none
    return ErrorCode.topic_authorization_failed


def _group_allowed(ctx: RequestContext, group_id: str) -> bool:
    return authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)


async def _asked(
    ctx: RequestContext, group_id: str, topics: Sequence[Topic] | None, slicer: Slicer
) -> Asked:
    """(topic, partitions) to answer: those asked for, or (null topics) every committed
    partition of the group on a topic the principal may describe, as Kafka filters them:
    topics by name, partitions in order (gathered in slices: a group may hold 100,000s)."""
    if topics is not None:
        return [(t.name, list(t.partition_indexes)) for t in topics]
    committed: dict[str, list[int]] = {}
    for topic, partition in ctx.services.offsets.group_offsets(group_id):
        committed.setdefault(topic, []).append(partition)
        await slicer.pause()
    for partitions in committed.values():
        partitions.sort()  # clients commit in order: runs Timsort merges in a linear pass
        await slicer.pause()
    return [(t, committed[t]) for t in sorted(committed) if _topic_code(ctx, t) is ErrorCode.none]


async def _answer(
    ctx: RequestContext,
    group_id: str,
    topics: Sequence[Topic] | None,
    row: type[Row],
    slicer: Slicer,
    stable: bool = False,
) -> Answer[Row]:
    """Each asked topic's partitions with their committed offsets (-1: none), as `row`s. With
    `require_stable` (v7+), a partition an open transaction commits an offset of is answered
    UNSTABLE_OFFSET_COMMIT, as Kafka's `GroupMetadataManager.getOffsets` (KIP-447).

    Rows are made directly from the store's values, with the ints passed as they are
    (`cast`): kio's checked `i32(...)` costs more than the row itself, and a request may
    name 100,000s of partitions."""
    fetch = ctx.services.offsets.fetch
    pending = ctx.services.transactions.has_pending_offset
    staged = ctx.services.offsets.staged  # `--processes N`: transactions coordinated elsewhere
    if len(staged):
        local = pending

        def pending(group: str, tp: tuple[str, int]) -> bool:
            return local(group, tp) or staged.has_pending(group, tp)

    answer: Answer[Row] = []
    for topic, partitions in await _asked(ctx, group_id, topics, slicer):
        code = _topic_code(ctx, topic)
        allowed = code is ErrorCode.none
        rows: list[Row] = []
        append = rows.append
        for p in partitions:
            value = fetch(group_id, topic, p) if allowed else None
            if stable and pending(group_id, (topic, p)):
                append(_row(row, p, NO_OFFSET, -1, "", ErrorCode.unstable_offset_commit))
            elif value is None:
                append(_row(row, p, NO_OFFSET, -1, "", code))
            else:
                append(_row(row, p, value.offset, value.leader_epoch, value.metadata, code))
            await slicer.pause()
        answer.append((topic, tuple(rows)))
    return answer


def _row(
    row: type[Row], partition: int, offset: int, epoch: int, metadata: str, code: ErrorCode
) -> Row:
    return row(
        partition_index=cast(i32, partition),
        committed_offset=cast(i64, offset),
        committed_leader_epoch=cast(i32, epoch),
        metadata=metadata,
        error_code=code,
    )


async def _one_group(
    ctx: RequestContext,
    group_id: str,
    topics: Sequence[Topic] | None,
    slicer: Slicer,
    stable: bool,
) -> tuple[v7.response.OffsetFetchResponseTopic, ...]:
    r = v7.response
    answer = await _answer(ctx, group_id, topics, r.OffsetFetchResponsePartition, slicer, stable)
    return tuple(
        [
            r.OffsetFetchResponseTopic(name=TopicName(topic), partitions=rows)
            for topic, rows in answer
        ]
    )


async def _group(
    ctx: RequestContext,
    group_id: str,
    topics: Sequence[Topic] | None,
    slicer: Slicer,
    stable: bool,
) -> v9.response.OffsetFetchResponseGroup:
    r = v9.response
    if not _group_allowed(ctx, group_id):
        return r.OffsetFetchResponseGroup(
            group_id=GroupId(group_id), topics=(), error_code=ErrorCode.group_authorization_failed
        )
    if not_coordinator(ctx, group_id):
        return r.OffsetFetchResponseGroup(
            group_id=GroupId(group_id), topics=(), error_code=ErrorCode.not_coordinator
        )
    answer = await _answer(ctx, group_id, topics, r.OffsetFetchResponsePartitions, slicer, stable)
    return r.OffsetFetchResponseGroup(
        group_id=GroupId(group_id),
        topics=tuple(
            [
                r.OffsetFetchResponseTopics(name=TopicName(topic), partitions=rows)
                for topic, rows in answer
            ]
        ),
        error_code=ErrorCode.none,
    )


async def _not_coordinator(
    request: OneGroup, topics: Sequence[Topic] | None
) -> v7.OffsetFetchResponse:
    """NOT_COORDINATOR for one group: v2+ carry it in the top-level error code; v1 has none,
    so each partition asked carries it, offset -1, as Kafka's `OffsetFetchResponse.groupError`
    (in older Kafka `OffsetFetchRequest.getErrorResponse`) (a slice at a time: a request may
    name a million partitions)."""
    r = v7.response
    rows: list[v7.response.OffsetFetchResponseTopic] = []
    if isinstance(request, v1.OffsetFetchRequest) and topics is not None:
        code = ErrorCode.not_coordinator
        slicer = Slicer()
        for t in topics:
            partitions = []
            for p in t.partition_indexes:
                partitions.append(_row(r.OffsetFetchResponsePartition, p, NO_OFFSET, -1, "", code))
                await slicer.pause()
            rows.append(
                r.OffsetFetchResponseTopic(name=TopicName(t.name), partitions=tuple(partitions))
            )
    return v7.OffsetFetchResponse(
        throttle_time=NO_THROTTLE, topics=tuple(rows), error_code=ErrorCode.not_coordinator
    )


async def handle(
    ctx: RequestContext, request: Request
) -> v7.OffsetFetchResponse | v9.OffsetFetchResponse:
    slicer = Slicer()  # a request may name a million groups, or partitions
    if isinstance(request, (v8.OffsetFetchRequest, v9.OffsetFetchRequest)):
        groups = []
        for g in request.groups:
            groups.append(await _group(ctx, g.group_id, g.topics, slicer, request.require_stable))
            await slicer.pause()
        return v9.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))
    if not _group_allowed(ctx, request.group_id):
        return v7.OffsetFetchResponse(
            throttle_time=NO_THROTTLE, topics=(), error_code=ErrorCode.group_authorization_failed
        )
    topics: Sequence[Topic] | None = request.topics
    if not_coordinator(ctx, request.group_id):
        return await _not_coordinator(request, topics)
    stable = not isinstance(request, _NO_REQUIRE_STABLE) and request.require_stable
    return v7.OffsetFetchResponse(
        throttle_time=NO_THROTTLE,
        topics=await _one_group(ctx, request.group_id, topics, slicer, stable),
        error_code=ErrorCode.none,
    )


HANDLER = handler(
    handle,
    v1.OffsetFetchRequest, v2.OffsetFetchRequest, v3.OffsetFetchRequest,
    v4.OffsetFetchRequest, v5.OffsetFetchRequest, v6.OffsetFetchRequest,
    v7.OffsetFetchRequest, v8.OffsetFetchRequest, v9.OffsetFetchRequest,
    responses=(v7.OffsetFetchResponse, v9.OffsetFetchResponse),
    acl=((AclOperation.DESCRIBE, ResourceType.GROUP), (AclOperation.DESCRIBE, ResourceType.TOPIC)),
)  # fmt: skip
