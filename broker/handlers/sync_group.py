"""SyncGroup (14): the leader hands in the assignments; every member gets its own back.

The broker relays the leader's bytes and never computes an assignment. v5 names the
protocol type and name, which must match the group's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.sync_group import v0
from kio.schema.sync_group import v1
from kio.schema.sync_group import v2
from kio.schema.sync_group import v3
from kio.schema.sync_group import v4
from kio.schema.sync_group import v5

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from coordinator.classic_group import SyncResult
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = (
    v0.SyncGroupRequest
    | v1.SyncGroupRequest
    | v2.SyncGroupRequest
    | v3.SyncGroupRequest
    | v4.SyncGroupRequest
    | v5.SyncGroupRequest
)
_NO_INSTANCE_ID = (v0.SyncGroupRequest, v1.SyncGroupRequest, v2.SyncGroupRequest)  # KIP-345: v3


def _response(r: SyncResult) -> v5.SyncGroupResponse:
    return v5.SyncGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=r.error,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )


def _inconsistent(ctx: RequestContext, request: Request) -> bool:
    """v5 names the protocol; a name other than the group's is refused, as Kafka does."""
    if not isinstance(request, v5.SyncGroupRequest):
        return False
    group = ctx.services.classic_groups.coordinator.groups.get(request.group_id)
    if group is None:
        return False
    return (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
        request.protocol_name is not None and request.protocol_name != group.protocol_name
    )


async def _assignments(request: Request) -> dict[str, bytes]:
    """The leader's assignments by member id (a request may list a million)."""
    out: dict[str, bytes] = {}
    slicer = Slicer()
    for a in request.assignments:
        out[a.member_id] = a.assignment
        await slicer.pause()
    return out


async def handle(ctx: RequestContext, request: Request) -> v5.SyncGroupResponse:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(SyncResult(error=ErrorCode.group_authorization_failed))
    if not_coordinator(ctx, request.group_id):
        return _response(SyncResult(error=ErrorCode.not_coordinator))
    if _inconsistent(ctx, request):
        return _response(SyncResult(error=ErrorCode.inconsistent_group_protocol))
    result = await ctx.services.classic_groups.sync(
        request.group_id,
        request.member_id,
        request.generation_id,
        None if isinstance(request, _NO_INSTANCE_ID) else request.group_instance_id,
        await _assignments(request),
    )
    return _response(result)


HANDLER = handler(
    handle,
    v0.SyncGroupRequest,
    v1.SyncGroupRequest,
    v2.SyncGroupRequest,
    v3.SyncGroupRequest,
    v4.SyncGroupRequest,
    v5.SyncGroupRequest,
    acl=((AclOperation.READ, ResourceType.GROUP),),
)
