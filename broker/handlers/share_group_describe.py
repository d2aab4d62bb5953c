"""ShareGroupDescribe (77): state, epochs and members (with their assignments) of share groups."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.share_group_describe import v1
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.authorization import authorized_operations
from broker.authorized_operations import GROUP_OPERATIONS
from broker.authorized_operations import NOT_REQUESTED
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_COORDINATOR_MESSAGE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import sliced_map
from coordinator.share_group import ShareGroup
from coordinator.share_group import ShareGroupMember
from protocol.acl import AclOperation
from protocol.acl import ResourceType

ASSIGNOR = "simple"
DESCRIBE, GROUP = AclOperation.DESCRIBE, ResourceType.GROUP

r = v1.response


def _member(ctx: RequestContext, m: ShareGroupMember) -> v1.response.Member:
    logs = ctx.services.logs
    topics = []
    for topic_id, partitions in sorted(m.assignment.items()):
        info = logs.topic_by_id(topic_id)
        topics.append(
            r.TopicPartitions(
                topic_id=topic_id,
                topic_name=TopicName(info.name if info else ""),
                partitions=tuple(i32(p) for p in partitions),
            )
        )
    return r.Member(
        member_id=m.member_id,
        rack_id=m.rack_id,
        member_epoch=i32(m.member_epoch),
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=tuple(TopicName(t) for t in m.subscribed),
        assignment=r.Assignment(topic_partitions=tuple(topics)),
    )


def _refused(group_id: GroupId, code: ErrorCode, message: str) -> v1.response.DescribedGroup:
    return r.DescribedGroup(
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="Dead",
        group_epoch=i32(-1),
        assignment_epoch=i32(-1),
        assignor_name="",
        members=(),
        authorized_operations=NOT_REQUESTED,
    )


def _described(
    ctx: RequestContext, group_id: GroupId, group: ShareGroup | None, with_ops: bool
) -> v1.response.DescribedGroup:
    if not authorize(ctx, DESCRIBE, GROUP, group_id):
        return _refused(group_id, ErrorCode.group_authorization_failed, "no DESCRIBE on group")
    if group_id and not_coordinator(ctx, group_id):
        return _refused(group_id, ErrorCode.not_coordinator, NOT_COORDINATOR_MESSAGE)
    if group is None:
        code = ErrorCode.invalid_group_id if not group_id else ErrorCode.group_id_not_found
        message = "group id is empty" if not group_id else f"no share group {group_id}"
        return _refused(group_id, code, message)
    ops = (
        authorized_operations(ctx, GROUP, group_id, GROUP_OPERATIONS) if with_ops else NOT_REQUESTED
    )
    return r.DescribedGroup(
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state,
        group_epoch=i32(group.group_epoch),
        assignment_epoch=i32(group.assignment_epoch),
        assignor_name=ASSIGNOR,
        members=tuple(_member(ctx, m) for _, m in sorted(group.members.items())),
        authorized_operations=ops,
    )


async def handle(
    ctx: RequestContext, request: v1.ShareGroupDescribeRequest
) -> v1.ShareGroupDescribeResponse:
    admin = ctx.services.share_group_admin
    with_ops = request.include_authorized_operations
    groups = await sliced_map(  # a request may name a million groups
        lambda g: _described(ctx, g, admin.group(g) if g else None, with_ops), request.group_ids
    )
    return v1.ShareGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))


HANDLER = handler(handle, v1.ShareGroupDescribeRequest, acl=((DESCRIBE, GROUP),))
