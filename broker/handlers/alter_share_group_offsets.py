"""AlterShareGroupOffsets (91): set the SPSO of share-partitions of an EMPTY share group.

Every in-flight state and delivery count of a reset share-partition is dropped, and the new
start is written as a SHARE_CHECKPOINT before the answer, so it survives a restart. A group
with members gets NON_EMPTY_GROUP for the whole request; an unknown group is created empty
(this is how a share group is initialised before it first runs, KIP-932). An id another kind
of group holds, or that has committed offsets (Kafka's "simple" classic group), gets
GROUP_ID_NOT_FOUND and nothing is made over it, as Kafka's `getOrMaybeCreateShareGroup` does.

The resets run to their end if the client goes (`broker.to_the_end`), as Kafka's coordinator
writes an accepted request's records whatever became of it: share-partitions are reset a slice
at a time, and a request cancelled between slices left some reset and the rest not.
"""

from __future__ import annotations

import uuid

import structlog
from kio.schema.alter_share_group_offsets import v0
from kio.schema.errors import ErrorCode

from broker import share_admin_remote as remote
from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_COORDINATOR_MESSAGE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.slicing import Slicer
from coordinator.group_registry import GroupKind
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError
from storage.topics import TopicInfo

# KIP-932: READ on the group, READ on each topic.
ACL_CHECKS = ((AclOperation.READ, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC))
Response = v0.AlterShareGroupOffsetsResponse


log = structlog.get_logger("shoal.groups")


Partition = tuple[str, int]


async def _last_offsets(
    request: v0.AlterShareGroupOffsetsRequest, slicer: Slicer
) -> dict[Partition, int]:
    """Each partition's last valid start offset in the request: a partition named again is
    reset once, to where resetting it entry by entry would have left it (a request may name
    one partition a million times)."""
    last: dict[Partition, int] = {}
    for t in request.topics:
        for p in t.partitions:
            if p.start_offset >= 0:
                last[(t.topic_name, p.partition_index)] = p.start_offset
            await slicer.pause()
    return last


async def _topic(
    ctx: RequestContext,
    group_id: str,
    t: v0.request.AlterShareGroupOffsetsRequestTopic,
    last: dict[Partition, int],
    done: dict[Partition, ErrorCode],
    slicer: Slicer,
) -> v0.response.AlterShareGroupOffsetsResponseTopic:
    topic = ctx.services.logs.topic(t.topic_name)
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    rows = []
    readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, t.topic_name)
    for p in t.partitions:
        message: str | None
        if not readable:
            code, message = ErrorCode.topic_authorization_failed, None
        elif topic is None or not 0 <= p.partition_index < topic.partitions:
            code, message = (
                ErrorCode.unknown_topic_or_partition,
                f"no {t.topic_name}-{p.partition_index}",
            )
        elif p.start_offset < 0:
            code, message = ErrorCode.invalid_request, "start offset must not be negative"
        else:
            key = (t.topic_name, p.partition_index)
            if key not in done:
                done[key] = _reset(offsets, group_id, topic, key, last[key])
            code, message = done[key], None
        rows.append(
            v0.response.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=code, error_message=message
            )
        )
        await slicer.pause()
    return v0.response.AlterShareGroupOffsetsResponseTopic(
        topic_name=t.topic_name,
        topic_id=topic.topic_id if topic and readable else None,
        partitions=tuple(rows),
    )


async def handle(ctx: RequestContext, request: v0.AlterShareGroupOffsetsRequest) -> Response:
    return await ctx.services.changes.to_the_end(_alter(ctx, request))


async def _alter(ctx: RequestContext, request: v0.AlterShareGroupOffsetsRequest) -> Response:
    if not authorize(ctx, ACL_CHECKS[0][0], ResourceType.GROUP, request.group_id):
        return Response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_authorization_failed,
            error_message="not authorized on the group",
            responses=(),
        )
    if not_coordinator(ctx, request.group_id):  # nothing made here: not this node's group
        return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.not_coordinator,
                        error_message=NOT_COORDINATOR_MESSAGE, responses=())  # fmt: skip
    s = ctx.services
    other = s.groups.other_kind(GroupKind.SHARE, request.group_id)
    if other is not None or s.offsets.has_group(request.group_id):
        return Response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_id_not_found,
            error_message=f"Group {request.group_id} is not a share group.",
            responses=(),
        )
    try:
        group = s.share_group_admin.require_empty(request.group_id, create=True)
        s.share_groups.record(group.group_id, group.group_epoch)  # --processes N: known after
    except CoordinatorError as e:  # a restart whichever nodes hold its state
        return Response(
            throttle_time=NO_THROTTLE, error_code=e.error_code, error_message=str(e), responses=()
        )
    except StorageError as e:
        return Response(throttle_time=NO_THROTTLE, error_code=e.error_code,
                        error_message="the share group was not recorded", responses=())  # fmt: skip
    slicer = Slicer()
    last = await _last_offsets(request, slicer)
    done: dict[Partition, ErrorCode] = await _reset_elsewhere(ctx, request.group_id, last)
    topics = [await _topic(ctx, request.group_id, t, last, done, slicer) for t in request.topics]
    return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, responses=tuple(topics))


async def _reset_elsewhere(
    ctx: RequestContext, group_id: str, last: dict[Partition, int]
) -> dict[Partition, ErrorCode]:
    """`--processes N`: the partitions other processes lead are reset by their leaders
    (InitializeShareGroupState, as Kafka's coordinator initialises them through its persister);
    their outcomes, by partition. Partitions unknown or not readable are left to `_topic`."""
    s = ctx.services
    if s.node_links is None:
        return {}
    parts: list[tuple[TopicInfo, int]] = []
    starts: dict[tuple[uuid.UUID, int], int] = {}
    for (name, p), start in last.items():
        topic = s.logs.topic(name)
        if (
            topic is not None
            and 0 <= p < topic.partitions
            and remote.led_elsewhere(s, topic, p)
            and authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name)
        ):
            parts.append((topic, p))
            starts[(topic.topic_id, p)] = start
    if not parts:
        return {}
    answers = await remote.resets(s, group_id, parts, starts)
    for topic, p in parts:
        if answers[(topic.topic_id, p)] == ErrorCode.none:
            log.info("share group offset reset", group=group_id, topic=topic.name, partition=p,
                     start_offset=starts[(topic.topic_id, p)], by="leader")  # fmt: skip
    return {(t.name, p): answers[(t.topic_id, p)] for t, p in parts}


def _reset(
    offsets: ShareGroupOffsets, group_id: str, topic: TopicInfo, key: Partition, start: int
) -> ErrorCode:
    code = offsets.reset(group_id, topic, key[1], start)
    if code == ErrorCode.none:
        log.info("share group offset reset", group=group_id, topic=key[0], partition=key[1],
                 start_offset=start)  # fmt: skip
    return code


HANDLER = handler(handle, v0.AlterShareGroupOffsetsRequest, acl=ACL_CHECKS)
