"""ShareGroupHeartbeat (76): join (epoch 0), stay (current epoch), leave (-1)."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat import v1
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from coordinator.assignor import Assignment
from coordinator.share_group import CoordinatorError

Response = v1.ShareGroupHeartbeatResponse


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


async def handle(ctx: RequestContext, request: v1.ShareGroupHeartbeatRequest) -> Response:
    s = ctx.services
    now = s.now_ms()
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
        return Response(
            throttle_time=NO_THROTTLE,
            error_code=e.error_code,
            error_message=str(e),
            member_id=request.member_id,
            member_epoch=i32(-1),
            heartbeat_interval=i32Timedelta.parse(datetime.timedelta(0)),
        )
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


HANDLER = handler(handle, v1.ShareGroupHeartbeatRequest)
