"""AlterShareGroupOffsets (91): set the SPSO of share-partitions of an EMPTY share group.

Every in-flight state and delivery count of a reset share-partition is dropped, and the new
start is written as a SHARE_CHECKPOINT before the answer, so it survives a restart. A group
with members gets NON_EMPTY_GROUP for the whole request; an unknown group is created empty
(this is how a share group is initialised before it first runs, KIP-932).
"""

from __future__ import annotations

import structlog
from kio.schema.alter_share_group_offsets import v0
from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_group_offsets import group_admin
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType

# KIP-932: READ on the group, READ on each topic.
ACL_CHECKS = ((AclOperation.READ, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC))
Response = v0.AlterShareGroupOffsetsResponse


log = structlog.get_logger("shoal.groups")


def _topic(
    ctx: RequestContext, group_id: str, t: v0.request.AlterShareGroupOffsetsRequestTopic
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
        else:
            code = offsets.reset(group_id, topic, p.partition_index, p.start_offset)
            if code == ErrorCode.none:
                log.info("share group offset reset", group=group_id, topic=t.topic_name,
                         partition=p.partition_index, start_offset=p.start_offset)  # fmt: skip
            message = (
                "start offset must not be negative" if code == ErrorCode.invalid_request else None
            )
        rows.append(
            v0.response.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=code, error_message=message
            )
        )
    return v0.response.AlterShareGroupOffsetsResponseTopic(
        topic_name=t.topic_name,
        topic_id=topic.topic_id if topic and readable else None,
        partitions=tuple(rows),
    )


async def handle(ctx: RequestContext, request: v0.AlterShareGroupOffsetsRequest) -> Response:
    if not authorize(ctx, ACL_CHECKS[0][0], ResourceType.GROUP, request.group_id):
        return Response(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_authorization_failed,
            error_message="not authorized on the group",
            responses=(),
        )
    try:
        s = ctx.services
        group_admin(s.coordinator, s.share_partitions).require_empty(request.group_id, create=True)
    except CoordinatorError as e:
        return Response(
            throttle_time=NO_THROTTLE, error_code=e.error_code, error_message=str(e), responses=()
        )
    topics = tuple(_topic(ctx, request.group_id, t) for t in request.topics)
    return Response(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, responses=topics)


HANDLER = handler(handle, v0.AlterShareGroupOffsetsRequest, acl=ACL_CHECKS)
