"""JoinGroup (11): a classic consumer-group member joins; the answer waits for the rebalance.

v4+ get MEMBER_ID_REQUIRED first (KIP-394), v5+ may name a static member, v9 lets a static
leader that rejoins skip the assignment (KIP-814). The newest response class answers every
version: each version's writer reads only its own fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode
from kio.schema.join_group import v0
from kio.schema.join_group import v1
from kio.schema.join_group import v2
from kio.schema.join_group import v3
from kio.schema.join_group import v4
from kio.schema.join_group import v5
from kio.schema.join_group import v6
from kio.schema.join_group import v7
from kio.schema.join_group import v8
from kio.schema.join_group import v9
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.classic_common import millis
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import sliced_map
from coordinator.classic_group import JoinResult
from coordinator.classic_member import JoinRequest
from coordinator.group_registry import GroupKind
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = (
    v0.JoinGroupRequest
    | v1.JoinGroupRequest
    | v2.JoinGroupRequest
    | v3.JoinGroupRequest
    | v4.JoinGroupRequest
    | v5.JoinGroupRequest
    | v6.JoinGroupRequest
    | v7.JoinGroupRequest
    | v8.JoinGroupRequest
    | v9.JoinGroupRequest
)
_NO_INSTANCE_ID = (  # KIP-345: from v5
    v0.JoinGroupRequest, v1.JoinGroupRequest, v2.JoinGroupRequest, v3.JoinGroupRequest,
    v4.JoinGroupRequest,
)  # fmt: skip
NULLABLE_PROTOCOL_NAME = 7  # protocol name is a non-null string before v7


class _Protocol(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def metadata(self) -> bytes: ...


def _protocol(p: _Protocol) -> tuple[str, bytes]:
    return p.name, p.metadata


async def _join_request(ctx: RequestContext, request: Request) -> JoinRequest:
    protocols: Sequence[_Protocol] = request.protocols
    session_ms = millis(request.session_timeout)
    rebalance_ms = session_ms if isinstance(request, v0.JoinGroupRequest) else None
    if rebalance_ms is None:
        assert not isinstance(request, v0.JoinGroupRequest)
        rebalance_ms = millis(request.rebalance_timeout)
    return JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=None
        if isinstance(request, _NO_INSTANCE_ID)
        else request.group_instance_id,
        protocol_type=request.protocol_type,
        # A request may list a million protocols.
        protocols=tuple(await sliced_map(_protocol, protocols)),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        require_known_member_id=ctx.version >= 4,
        can_skip_assignment=ctx.version >= 9,
        client_id=ctx.header.client_id or "",
        client_host=ctx.host,
    )


def _response(ctx: RequestContext, r: JoinResult) -> v9.JoinGroupResponse:
    name = r.protocol_name
    if name is None and ctx.version < NULLABLE_PROTOCOL_NAME:
        name = ""
    return v9.JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=r.error,
        generation_id=i32(r.generation_id),
        protocol_type=r.protocol_type,
        protocol_name=name,
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=tuple(
            v9.response.JoinGroupResponseMember(
                member_id=m, group_instance_id=instance, metadata=meta
            )
            for m, instance, meta in r.members
        ),
    )


async def handle(ctx: RequestContext, request: Request) -> v9.JoinGroupResponse:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, JoinResult(request.member_id, error=_DENIED))
    if not_coordinator(ctx, request.group_id):
        return _response(ctx, JoinResult(request.member_id, error=ErrorCode.not_coordinator))
    # One kind per group id (no online migration between the protocols yet); a share group
    # counts even when known only from its durable state.
    if (
        ctx.services.groups.other_kind(GroupKind.CLASSIC, request.group_id, durable=True)
        is not None
    ):
        return _response(ctx, JoinResult(request.member_id, error=_INCONSISTENT))
    result = await ctx.services.classic_groups.join(await _join_request(ctx, request))
    return _response(ctx, result)


_DENIED = ErrorCode.group_authorization_failed
_INCONSISTENT = ErrorCode.inconsistent_group_protocol

HANDLER = handler(
    handle,
    v0.JoinGroupRequest,
    v1.JoinGroupRequest,
    v2.JoinGroupRequest,
    v3.JoinGroupRequest,
    v4.JoinGroupRequest,
    v5.JoinGroupRequest,
    v6.JoinGroupRequest,
    v7.JoinGroupRequest,
    v8.JoinGroupRequest,
    v9.JoinGroupRequest,
    acl=((AclOperation.READ, ResourceType.GROUP),),
)
