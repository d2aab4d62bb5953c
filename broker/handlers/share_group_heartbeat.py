"""ShareGroupHeartbeat (76): join (epoch 0), stay (current epoch), leave (-1)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from coordinator.share_group import CoordinatorError
from protocol.messages import build


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
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
        return build(
            r.type,
            error_code=e.error_code,
            error_message=str(e),
            member_id=request.member_id,
            member_epoch=-1,
        )
    if departure is not None:
        s.share_fetch.member_departed(departure, now)
    assignment = None
    if result.assignment is not None:
        assignment = build(
            r.Assignment,
            topic_partitions=tuple(
                build(r.TopicPartitions, topic_id=topic_id, partitions=partitions)
                for topic_id, partitions in sorted(result.assignment.items())
            ),
        )
    return build(
        r.type,
        error_code=ErrorCode.none,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )


HANDLER = Handler(
    api_key=76, min_version=1, max_version=1, handle=handle, name="ShareGroupHeartbeat"
)
