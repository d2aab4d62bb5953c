"""Heartbeat (12): a classic member stays alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat import v0
from kio.schema.heartbeat import v1
from kio.schema.heartbeat import v2
from kio.schema.heartbeat import v3
from kio.schema.heartbeat import v4

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = (
    v0.HeartbeatRequest
    | v1.HeartbeatRequest
    | v2.HeartbeatRequest
    | v3.HeartbeatRequest
    | v4.HeartbeatRequest
)
_NO_INSTANCE_ID = (v0.HeartbeatRequest, v1.HeartbeatRequest, v2.HeartbeatRequest)  # KIP-345: v3


async def handle(ctx: RequestContext, request: Request) -> v4.HeartbeatResponse:
    s = ctx.services
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        code = ErrorCode.group_authorization_failed
    elif not_coordinator(ctx, request.group_id):
        code = ErrorCode.not_coordinator
    else:
        code = s.classic_groups.coordinator.heartbeat(
            request.group_id,
            request.member_id,
            request.generation_id,
            None if isinstance(request, _NO_INSTANCE_ID) else request.group_instance_id,
            s.now_ms(),
        )
    return v4.HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=code)


HANDLER = handler(
    handle,
    v0.HeartbeatRequest,
    v1.HeartbeatRequest,
    v2.HeartbeatRequest,
    v3.HeartbeatRequest,
    v4.HeartbeatRequest,
    acl=((AclOperation.READ, ResourceType.GROUP),),
)
