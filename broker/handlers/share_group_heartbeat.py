"""ShareGroupHeartbeat (76): join (epoch 0), stay (current epoch), leave (-1)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat import v1
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_COORDINATOR_MESSAGE
from broker.handlers.common import not_coordinator
from broker.handlers.common import too_many_subscribed
from broker.registry import handler
from coordinator.assignor import Assignment
from coordinator.group_registry import GroupKind
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError

Response = v1.ShareGroupHeartbeatResponse
DESCRIBE = AclOperation.DESCRIBE

log = structlog.get_logger("shoal.groups")


def _assignment(assignment: Assignment | None) -> v1.response.Assignment | None:
    if assignment is None:
        return None  # unchanged since the member's last heartbeat
    return v1.response.Assignment(
        topic_partitions=tuple(
            v1.response.TopicPartitions(
                topic_id=topic_id, partitions=tuple(i32(p) for p in partitions)
            )
            for topic_id, partitions in sorted(assignment.items())
        )
    )


def _error(request: v1.ShareGroupHeartbeatRequest, code: ErrorCode, message: str) -> Response:
    return Response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        member_id=request.member_id,
        member_epoch=i32(-1),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(0)),
    )


def _unreadable(ctx: RequestContext, topics: Sequence[str] | None) -> list[str]:
    """Subscribed topics the principal may not DESCRIBE: Kafka refuses the heartbeat for them,
    as for a consumer group (reading the records then takes READ, checked by ShareFetch)."""
    return [t for t in topics or () if not authorize(ctx, DESCRIBE, ResourceType.TOPIC, t)]


def _record(ctx: RequestContext, group_id: str) -> None:
    """`--processes N`: a group made here is recorded in this process's offsets log, so that
    it is known after a restart whichever nodes hold its state (`share_group_records`); a
    write that fails is tried again at the group's next heartbeat (a set lookup when
    recorded)."""
    s = ctx.services
    group = s.coordinator.groups.get(group_id)
    if group is None:
        return
    try:
        s.share_groups.record(group_id, group.group_epoch)
    except StorageError as e:
        log.warning("share group not recorded; tried again at its next heartbeat",
                    group=group_id, error=str(e))  # fmt: skip


async def handle(ctx: RequestContext, request: v1.ShareGroupHeartbeatRequest) -> Response:
    s = ctx.services
    now = s.now_ms()
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(request, ErrorCode.group_authorization_failed, "no READ on the group")
    if not_coordinator(ctx, request.group_id):
        return _error(request, ErrorCode.not_coordinator, NOT_COORDINATOR_MESSAGE)
    other = s.groups.other_kind(GroupKind.SHARE, request.group_id)
    if other is GroupKind.CLASSIC:
        # One kind per group id; Kafka answers this for a classic group's id.
        message = f"Group {request.group_id} is not a share group."
        return _error(request, ErrorCode.group_id_not_found, message)
    if too_many := too_many_subscribed(ctx, len(request.subscribed_topic_names or ())):
        return _error(request, ErrorCode.invalid_request, too_many)
    denied = _unreadable(ctx, request.subscribed_topic_names)
    if denied:
        return _error(request, ErrorCode.topic_authorization_failed, f"no DESCRIBE on {denied}")
    if other is not None:  # a consumer group (or any other kind): Kafka's answer for it
        return _error(
            request, ErrorCode.group_id_not_found, f"{request.group_id} is not a share group"
        )
    try:
        result, departure = s.coordinator.heartbeat(
            request.group_id,
            request.member_id,
            request.member_epoch,
            request.subscribed_topic_names,
            now,
            rack_id=request.rack_id,
            client_id=ctx.header.client_id or "",
            client_host=ctx.peer,
        )
    except CoordinatorError as e:
        return _error(request, e.error_code, str(e))
    _record(ctx, request.group_id)
    if departure is not None:
        s.share_fetch.member_departed(departure, now)
    return Response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        member_id=result.member_id,
        member_epoch=i32(result.member_epoch),
        heartbeat_interval=i32Timedelta.parse(
            datetime.timedelta(milliseconds=result.heartbeat_interval_ms)
        ),
        assignment=_assignment(result.assignment),
    )


HANDLER = handler(
    handle,
    v1.ShareGroupHeartbeatRequest,
    acl=((AclOperation.READ, ResourceType.GROUP), (DESCRIBE, ResourceType.TOPIC)),
)
