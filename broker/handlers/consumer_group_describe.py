"""ConsumerGroupDescribe (69): state, epochs, assignor and members (with their current and
target assignments) of KIP-848 consumer groups."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.consumer_group_describe import v0
from kio.schema.consumer_group_describe import v1
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i8
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
from coordinator.consumer_group import ConsumerGroup
from coordinator.consumer_group import ConsumerGroupMember
from coordinator.consumer_group import TopicPartition
from coordinator.consumer_group import grouped
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = v0.ConsumerGroupDescribeRequest | v1.ConsumerGroupDescribeRequest
DESCRIBE, GROUP = AclOperation.DESCRIBE, ResourceType.GROUP
CONSUMER_MEMBER = i8(1)  # v1's member type: a member speaking the consumer protocol

r = v1.response


def _assignment(ctx: RequestContext, partitions: Iterable[TopicPartition]) -> r.Assignment:
    logs = ctx.services.logs
    topics = []
    for topic_id, parts in grouped(partitions).items():
        info = logs.topic_by_id(topic_id)
        topics.append(
            r.TopicPartitions(
                topic_id=topic_id,
                topic_name=TopicName(info.name if info else ""),
                partitions=tuple(i32(p) for p in parts),
            )
        )
    return r.Assignment(topic_partitions=tuple(topics))


def _member(ctx: RequestContext, group: ConsumerGroup, m: ConsumerGroupMember) -> r.Member:
    return r.Member(
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=i32(m.member_epoch),
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=tuple(TopicName(t) for t in m.subscribed),
        subscribed_topic_regex=m.regex,
        assignment=_assignment(ctx, m.assigned),
        target_assignment=_assignment(ctx, group.target.get(m.member_id, ())),
        member_type=CONSUMER_MEMBER,
    )


def _refused(group_id: GroupId, code: ErrorCode, message: str) -> r.DescribedGroup:
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


def _described(ctx: RequestContext, group_id: GroupId, with_ops: bool) -> r.DescribedGroup:
    if not authorize(ctx, DESCRIBE, GROUP, group_id):
        return _refused(group_id, ErrorCode.group_authorization_failed, "no DESCRIBE on group")
    if not group_id:
        return _refused(group_id, ErrorCode.invalid_group_id, "group id is empty")
    if not_coordinator(ctx, group_id):
        return _refused(group_id, ErrorCode.not_coordinator, NOT_COORDINATOR_MESSAGE)
    group = ctx.services.consumer_groups.groups.get(group_id)
    if group is None:  # unknown, or another kind of group: Kafka's answer for both
        return _refused(group_id, ErrorCode.group_id_not_found, f"no consumer group {group_id}")
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
        assignor_name=group.assignor,
        members=tuple(_member(ctx, group, m) for _, m in sorted(group.members.items())),
        authorized_operations=ops,
    )


async def handle(ctx: RequestContext, request: Request) -> v1.ConsumerGroupDescribeResponse:
    with_ops = request.include_authorized_operations
    # A request may name a million groups.
    groups = await sliced_map(lambda g: _described(ctx, g, with_ops), request.group_ids)
    return v1.ConsumerGroupDescribeResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))


HANDLER = handler(
    handle,
    v0.ConsumerGroupDescribeRequest,
    v1.ConsumerGroupDescribeRequest,
    acl=((DESCRIBE, GROUP),),
)
