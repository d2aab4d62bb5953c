"""OffsetCommit (8): a consumer group's committed offsets, durable before the answer.

v2-v9 (librdkafka 2.16 sends v9 when offered; kio has no v0/v1). The group's coordinator, if
any, judges member and generation (`OffsetStore.check_commit`); a simple consumer (member ""
and generation -1) and the admin client commit freely. Every accepted partition of a request
is written in one batch to `__consumer_offsets`, and the answer waits for that append.
v2-v4's retention time is ignored, as Kafka 3+ does: offsets retention is the broker's.
"""

from __future__ import annotations

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit import v2
from kio.schema.offset_commit import v3
from kio.schema.offset_commit import v4
from kio.schema.offset_commit import v5
from kio.schema.offset_commit import v6
from kio.schema.offset_commit import v7
from kio.schema.offset_commit import v8
from kio.schema.offset_commit import v9
from kio.schema.types import TopicName

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from coordinator.group_registry import GroupKind
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.consumer_offsets import OffsetRecords
from protocol.consumer_offsets import OffsetValue
from storage.errors import StorageError

Request = (
    v2.OffsetCommitRequest | v3.OffsetCommitRequest | v4.OffsetCommitRequest
    | v5.OffsetCommitRequest | v6.OffsetCommitRequest | v7.OffsetCommitRequest
    | v8.OffsetCommitRequest | v9.OffsetCommitRequest
)  # fmt: skip
_NO_INSTANCE_ID = (
    v2.OffsetCommitRequest,
    v3.OffsetCommitRequest,
    v4.OffsetCommitRequest,
    v5.OffsetCommitRequest,
    v6.OffsetCommitRequest,
)  # fmt: skip  (KIP-345: v7)
_NO_LEADER_EPOCH = (
    v2.request.OffsetCommitRequestPartition,
    v3.request.OffsetCommitRequestPartition,
    v4.request.OffsetCommitRequestPartition,
    v5.request.OffsetCommitRequestPartition,
)  # (KIP-320: v6)
Response = v2.OffsetCommitResponse | v9.OffsetCommitResponse
Codes = dict[tuple[str, int], ErrorCode]
NO_GENERATION = -1  # a commit from outside any membership: the admin client, simple consumers

log = structlog.get_logger("shoal.offsets")


def _group_code(ctx: RequestContext, request: Request) -> ErrorCode:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed
    if not_coordinator(ctx, request.group_id):
        return ErrorCode.not_coordinator  # per partition: the response has no group code
    return ctx.services.offsets.check_commit(
        request.group_id,
        request.member_id,
        request.generation_id_or_member_epoch,
        None if isinstance(request, _NO_INSTANCE_ID) else request.group_instance_id,
    )


def _partition_code(ctx: RequestContext, topic: str, partition: int, metadata: str) -> ErrorCode:
    info = ctx.services.logs.topic(topic)
    if info is None or not 0 <= partition < info.partitions:
        return ErrorCode.unknown_topic_or_partition
    if len(metadata.encode()) > ctx.services.config.offset_metadata_max_bytes:
        return ErrorCode.offset_metadata_too_large
    return ErrorCode.none


async def _commit(ctx: RequestContext, request: Request, slicer: Slicer) -> Codes:
    """Each partition's answer; the accepted ones are encoded as they are checked (a slice at
    a time: 100,000 partitions take ~0.5 s of CPU) and written together, in one step."""
    codes: Codes = {}
    accepted: dict[tuple[str, int], OffsetValue] = {}
    records = OffsetRecords(request.group_id)
    group_code = _group_code(ctx, request)
    now = ctx.services.now_ms()
    for topic in request.topics:
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = (str(topic.name), int(p.partition_index))
            metadata = p.committed_metadata or ""
            code = group_code
            if code is ErrorCode.none:
                code = ErrorCode.none if readable else ErrorCode.topic_authorization_failed
            if code is ErrorCode.none:
                code = _partition_code(ctx, tp[0], tp[1], metadata)
            codes[tp] = code
            if code is ErrorCode.none:
                epoch = -1 if isinstance(p, _NO_LEADER_EPOCH) else int(p.committed_leader_epoch)
                accepted[tp] = value = OffsetValue(int(p.committed_offset), epoch, metadata, now)
                records.add(tp[0], tp[1], value)
            await slicer.pause()
    outside = not request.member_id and request.generation_id_or_member_epoch == NO_GENERATION
    reset = await _reset(ctx, request.group_id, accepted, slicer) if outside else None
    try:
        ctx.services.offsets.write_commit(request.group_id, accepted, records)
    except StorageError as e:
        codes.update(dict.fromkeys(accepted, e.error_code))
        return codes
    if reset is not None:
        log.info("offsets reset", group=request.group_id, client=ctx.header.client_id,
                 partitions=len(accepted), rewound=reset)  # fmt: skip
    return codes


async def _reset(
    ctx: RequestContext, group_id: str, offsets: dict[tuple[str, int], OffsetValue], slicer: Slicer
) -> int | None:
    """How many partitions a member-less commit moves back, when it is worth a log line: an
    offset set for a group the group coordinators know (an admin reset of an empty group),
    for the first time, or backwards. A simple consumer's forward commits are not logged."""
    s = ctx.services
    known = s.groups.kind(group_id, (GroupKind.CLASSIC, GroupKind.CONSUMER)) is not None
    rewound = fresh = 0
    for (topic, partition), value in offsets.items():
        before = s.offsets.fetch(group_id, topic, partition)
        fresh += before is None
        rewound += before is not None and value.offset < before.offset
        await slicer.pause()
    return rewound if known or fresh or rewound else None


async def handle(ctx: RequestContext, request: Request) -> Response:
    slicer = Slicer()  # a request may name a million partitions
    codes = await _commit(ctx, request, slicer)
    r = v9.response
    answered = []
    for t in request.topics:
        name, partitions = str(t.name), []
        for p in t.partitions:
            partitions.append(
                r.OffsetCommitResponsePartition(
                    partition_index=p.partition_index,
                    error_code=codes[(name, int(p.partition_index))],
                )
            )
            await slicer.pause()
        answered.append(
            r.OffsetCommitResponseTopic(name=TopicName(t.name), partitions=tuple(partitions))
        )
    topics = tuple(answered)
    if isinstance(request, v2.OffsetCommitRequest):
        return v2.OffsetCommitResponse(topics=topics)  # type: ignore[arg-type]  # same layout
    return v9.OffsetCommitResponse(throttle_time=NO_THROTTLE, topics=topics)


HANDLER = handler(
    handle,
    v2.OffsetCommitRequest, v3.OffsetCommitRequest, v4.OffsetCommitRequest,
    v5.OffsetCommitRequest, v6.OffsetCommitRequest, v7.OffsetCommitRequest,
    v8.OffsetCommitRequest, v9.OffsetCommitRequest,
    responses=(v2.OffsetCommitResponse, v9.OffsetCommitResponse),
    acl=((AclOperation.READ, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC)),
)  # fmt: skip
