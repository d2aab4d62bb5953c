"""DeleteShareGroupOffsets (92): forget the share-partitions of topics, for an EMPTY group.

The next member starts them again from `share.auto.offset.reset`. A topic the group has no
share-partition of answers UNKNOWN_TOPIC_OR_PARTITION, as does an unknown topic.
"""

from __future__ import annotations

import structlog
from kio.schema.delete_share_group_offsets import v0
from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_group_offsets import group_admin
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
    started = [p for p in range(topic.partitions) if offsets.initialised(group_id, topic, p)]
    if not started:
        return topic, ErrorCode.unknown_topic_or_partition, f"{group_id} has no offsets on {name}"
    try:
        for p in started:
            offsets.delete(group_id, topic, p)
            await slicer.pause()
    except StorageError as e:
        return topic, e.error_code, str(e)
    log.info("share group offsets deleted", group=group_id, topic=name, partitions=started)
    return topic, ErrorCode.none, None


async def handle(ctx: RequestContext, request: v0.DeleteShareGroupOffsetsRequest) -> Response:
    if not authorize(ctx, ACL_CHECKS[0][0], ResourceType.GROUP, request.group_id):
        return Response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_authorization_failed,
            error_message="not authorized on the group",
            responses=(),
        )
    try:
        group_admin(ctx.services.coordinator, ctx.services.share_partitions).require_empty(
            request.group_id
        )
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
