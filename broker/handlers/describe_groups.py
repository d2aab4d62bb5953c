"""DescribeGroups (15): classic consumer groups, with their members.

As Kafka 4 answers: from v6 an unknown group gets GROUP_ID_NOT_FOUND ("Group g not found.")
and a share or KIP-848 consumer group's id the same code ("Group g is not a classic group.",
KIP-1043, `GroupMetadataManager.classicGroup`); older versions
describe both as Dead with no error. Members' metadata and assignments, and the
protocol, are filled in only while the group is Stable.
"""

from __future__ import annotations

from kio.schema.describe_groups import v0
from kio.schema.describe_groups import v1
from kio.schema.describe_groups import v2
from kio.schema.describe_groups import v3
from kio.schema.describe_groups import v4
from kio.schema.describe_groups import v5
from kio.schema.describe_groups import v6
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId

from broker.authorization import authorize
from broker.authorization import authorized_operations
from broker.authorized_operations import GROUP_OPERATIONS
from broker.authorized_operations import NOT_REQUESTED
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import sliced_map
from coordinator.classic_group import ClassicGroup
from coordinator.classic_group import GroupState
from coordinator.group_registry import GroupKind
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = (
    v0.DescribeGroupsRequest
    | v1.DescribeGroupsRequest
    | v2.DescribeGroupsRequest
    | v3.DescribeGroupsRequest
    | v4.DescribeGroupsRequest
    | v5.DescribeGroupsRequest
    | v6.DescribeGroupsRequest
)
r = v6.response
GROUP = ResourceType.GROUP
ERRORS_FOR_OTHER_GROUPS = 6  # the first version that reports an unknown or non-classic id


def _empty(group_id: GroupId, code: ErrorCode, message: str | None) -> r.DescribedGroup:
    return r.DescribedGroup(
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state=GroupState.DEAD.value,
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=NOT_REQUESTED,
    )


def _members(group: ClassicGroup) -> tuple[r.DescribedGroupMember, ...]:
    protocol = group.protocol_name if group.state is GroupState.STABLE else None
    return tuple(
        r.DescribedGroupMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=b"" if protocol is None else m.metadata(protocol),
            member_assignment=b"" if protocol is None else m.assignment,
        )
        for m in group.members.values()
    )


def _described(ctx: RequestContext, group_id: GroupId, with_ops: bool) -> r.DescribedGroup:
    if not authorize(ctx, AclOperation.DESCRIBE, GROUP, group_id):
        return _empty(group_id, ErrorCode.group_authorization_failed, "no DESCRIBE on group")
    if not_coordinator(ctx, group_id):
        return _empty(group_id, ErrorCode.not_coordinator, None)
    group = ctx.services.classic_groups.coordinator.groups.get(group_id)
    if group is None:
        if ctx.version < ERRORS_FOR_OTHER_GROUPS:
            return _empty(group_id, ErrorCode.none, None)
        other = ctx.services.groups.other_kind(GroupKind.CLASSIC, group_id, durable=True)
        kind = "not found" if other is None else "is not a classic group"
        return _empty(group_id, ErrorCode.group_id_not_found, f"Group {group_id} {kind}.")
    ops = authorized_operations(ctx, GROUP, group_id, GROUP_OPERATIONS) if with_ops else None
    return r.DescribedGroup(
        error_code=ErrorCode.none,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if group.state is GroupState.STABLE else "",
        members=_members(group),
        authorized_operations=NOT_REQUESTED if ops is None else ops,
    )


async def handle(ctx: RequestContext, request: Request) -> v6.DescribeGroupsResponse:
    old = (v0.DescribeGroupsRequest, v1.DescribeGroupsRequest, v2.DescribeGroupsRequest)
    with_ops = False if isinstance(request, old) else request.include_authorized_operations
    # A request may name a million groups.
    groups = await sliced_map(lambda g: _described(ctx, g, with_ops), request.groups)
    return v6.DescribeGroupsResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))


HANDLER = handler(
    handle,
    v0.DescribeGroupsRequest,
    v1.DescribeGroupsRequest,
    v2.DescribeGroupsRequest,
    v3.DescribeGroupsRequest,
    v4.DescribeGroupsRequest,
    v5.DescribeGroupsRequest,
    v6.DescribeGroupsRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.GROUP),),
)
