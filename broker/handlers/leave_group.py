"""LeaveGroup (13): one member (v0-2) or a batch of members by id or instance id (v3+).

A v3+ answer carries an error per member; the top-level code is set only when the whole
request fails (an unknown group, no READ on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode
from kio.schema.leave_group import v0
from kio.schema.leave_group import v1
from kio.schema.leave_group import v2
from kio.schema.leave_group import v3
from kio.schema.leave_group import v4
from kio.schema.leave_group import v5

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import sliced_map
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Single = v0.LeaveGroupRequest | v1.LeaveGroupRequest | v2.LeaveGroupRequest
Request = Single | v3.LeaveGroupRequest | v4.LeaveGroupRequest | v5.LeaveGroupRequest
Response = v2.LeaveGroupResponse | v5.LeaveGroupResponse


class _Member(Protocol):
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


def _member(m: _Member) -> tuple[str, str | None]:
    return m.member_id, m.group_instance_id


async def _leaving(request: Request) -> list[tuple[str, str | None]]:
    if isinstance(request, (v0.LeaveGroupRequest, v1.LeaveGroupRequest, v2.LeaveGroupRequest)):
        return [(request.member_id, None)]
    # A request may list a million members.
    members: Sequence[_Member] = request.members
    return await sliced_map(_member, members)


def _response(
    ctx: RequestContext, code: ErrorCode, members: tuple[v5.response.MemberResponse, ...]
) -> Response:
    if ctx.version < 3:
        if code is ErrorCode.none and members:
            code = members[0].error_code
        return v2.LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=code)
    return v5.LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=code, members=members)


async def handle(ctx: RequestContext, request: Request) -> Response:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, ErrorCode.group_authorization_failed, ())
    if not_coordinator(ctx, request.group_id):
        return _response(ctx, ErrorCode.not_coordinator, ())
    leaving = await _leaving(request)
    try:
        codes = ctx.services.classic_groups.leave(request.group_id, leaving)
    except CoordinatorError as e:
        return _response(ctx, e.error_code, ())
    members = await sliced_map(
        lambda answer: v5.response.MemberResponse(
            member_id=answer[0][0], group_instance_id=answer[0][1], error_code=answer[1]
        ),
        zip(leaving, codes, strict=True),
    )
    return _response(ctx, ErrorCode.none, tuple(members))


HANDLER = handler(
    handle,
    v0.LeaveGroupRequest,
    v1.LeaveGroupRequest,
    v2.LeaveGroupRequest,
    v3.LeaveGroupRequest,
    v4.LeaveGroupRequest,
    v5.LeaveGroupRequest,
    responses=(v2.LeaveGroupResponse, v5.LeaveGroupResponse),
    acl=((AclOperation.READ, ResourceType.GROUP),),
)
