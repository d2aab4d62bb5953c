"""DeleteShareGroupOffsets (92): forget the share-partitions of topics, for an EMPTY group.

The next member starts them again from `share.auto.offset.reset`. A topic the group has no
share-partition of answers UNKNOWN_TOPIC_OR_PARTITION, as does an unknown topic.

The deletions run to their end if the client goes (`broker.to_the_end`), as
AlterShareGroupOffsets' resets: a request cancelled between slices left some share-partitions
of a topic forgotten and the rest not.
"""

from __future__ import annotations

import structlog
from kio.schema.delete_share_group_offsets import v0
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
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError
from storage.topics import TopicInfo

# KIP-932: DELETE on the group, READ on each topic.
ACL_CHECKS = ((AclOperation.DELETE, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC))
Response = v0.DeleteShareGroupOffsetsResponse
log = structlog.get_logger("shoal.groups")


async def _delete(
    ctx: RequestContext, group_id: str, name: str, slicer: Slicer
) -> tuple[TopicInfo | None, ErrorCode, str | None]:
    if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name):
        return None, ErrorCode.topic_authorization_failed, None
    topic = ctx.services.logs.topic(name)
    if topic is None:
        return None, ErrorCode.unknown_topic_or_partition, f"no topic {name!r}"
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    started = [
        p
        for p in range(topic.partitions)
        if not remote.led_elsewhere(s, topic, p) and offsets.initialised(group_id, topic, p)
    ]
    code, elsewhere = await _delete_elsewhere(ctx, group_id, topic)
    if code != ErrorCode.none:
        return topic, code, "a partition leader did not delete its share-partition"
    if not started and not elsewhere:
        return topic, ErrorCode.unknown_topic_or_partition, f"{group_id} has no offsets on {name}"
    try:
        for p in started:
            offsets.delete(group_id, topic, p)
            await slicer.pause()
    except StorageError as e:
        return topic, e.error_code, str(e)
    log.info("share group offsets deleted", group=group_id, topic=name, partitions=started,
             elsewhere=elsewhere)  # fmt: skip
    return topic, ErrorCode.none, None


async def _delete_elsewhere(
    ctx: RequestContext, group_id: str, topic: TopicInfo
) -> tuple[ErrorCode, list[int]]:
    """`--processes N`: the topic's share-partitions of the group that other processes lead,
    deleted by their leaders (ReadShareGroupStateSummary finds those the group started,
    DeleteShareGroupState forgets them, as Kafka's coordinator does through its persister);
    the first error, and the partitions deleted."""
    s = ctx.services
    parts = [(topic, p) for p in range(topic.partitions) if remote.led_elsewhere(s, topic, p)]
    if not parts:
        return ErrorCode.none, []
    described = await remote.summaries(s, group_id, parts)
    started = []
    for t, p in parts:
        got = described[(t.topic_id, p)]
        if isinstance(got, ErrorCode):
            return got, []
        if got.start_offset >= 0:
            started.append((t, p))
    if not started:
        return ErrorCode.none, []
    deleted = await remote.deletes(s, group_id, started)
    for t, p in started:
        if deleted[(t.topic_id, p)] != ErrorCode.none:
            return deleted[(t.topic_id, p)], []
    return ErrorCode.none, [p for _, p in started]


async def handle(ctx: RequestContext, request: v0.DeleteShareGroupOffsetsRequest) -> Response:
    return await ctx.services.changes.to_the_end(_delete_all(ctx, request))


async def _delete_all(ctx: RequestContext, request: v0.DeleteShareGroupOffsetsRequest) -> Response:
    if not authorize(ctx, ACL_CHECKS[0][0], ResourceType.GROUP, request.group_id):
        return Response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_authorization_failed,
            error_message="not authorized on the group",
            responses=(),
        )
    if not_coordinator(ctx, request.group_id):
        return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.not_coordinator,
                        error_message=NOT_COORDINATOR_MESSAGE, responses=())  # fmt: skip
    try:
        ctx.services.share_group_admin.require_empty(request.group_id)
    except CoordinatorError as e:
        return Response(
            throttle_time=NO_THROTTLE, error_code=e.error_code, error_message=str(e), responses=()
        )
    responses = []
    slicer = Slicer()  # a request may name a million topics
    for t in request.topics:
        await slicer.pause()
        topic, code, message = await _delete(ctx, request.group_id, t.topic_name, slicer)
        responses.append(
            v0.response.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name,
                topic_id=topic.topic_id if topic else None,
                error_code=code,
                error_message=message,
            )
        )
    return Response(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, responses=tuple(responses)
    )


HANDLER = handler(handle, v0.DeleteShareGroupOffsetsRequest, acl=ACL_CHECKS)
