"""ShareGroupDescribe (77): state, epochs and members (with their assignments) of share groups."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from broker.share.share_group_offsets import group_admin
from coordinator.share_group import ShareGroup
from coordinator.share_group import ShareGroupMember
from protocol.messages import build

ASSIGNOR = "simple"
NOT_REQUESTED = -(2**31)
# AclOperation codes a share group supports: READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11. Shoal has no ACLs, so every caller may do all of them.
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))


def _member(ctx: RequestContext, r: Response, m: ShareGroupMember) -> Any:
    logs = ctx.services.logs
    topics = []
    for topic_id, partitions in sorted(m.assignment.items()):
        info = logs.topic_by_id(topic_id)
        topics.append(
            build(
                r.TopicPartitions,
                topic_id=topic_id,
                topic_name=info.name if info else "",
                partitions=tuple(partitions),
            )
        )
    return build(
        r.Member,
        member_id=m.member_id,
        rack_id=m.rack_id,
        member_epoch=m.member_epoch,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=m.subscribed,
        assignment=build(r.Assignment, topic_partitions=tuple(topics)),
    )


def _described(
    ctx: RequestContext, r: Response, group_id: str, group: ShareGroup | None, ops: int
) -> Any:
    if group is None:
        code = ErrorCode.invalid_group_id if not group_id else ErrorCode.group_id_not_found
        message = "group id is empty" if not group_id else f"no share group {group_id}"
        return build(
            r.DescribedGroup,
            error_code=code,
            error_message=message,
            group_id=group_id,
            group_state="Dead",
            group_epoch=-1,
            assignment_epoch=-1,
            members=(),
            authorized_operations=NOT_REQUESTED,
        )
    return build(
        r.DescribedGroup,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=ASSIGNOR,
        members=tuple(_member(ctx, r, m) for _, m in sorted(group.members.items())),
        authorized_operations=ops,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    admin = group_admin(ctx.services.coordinator, ctx.services.share_partitions)
    ops = GROUP_OPERATIONS if request.include_authorized_operations else NOT_REQUESTED
    groups = tuple(
        _described(ctx, r, g, admin.group(g) if g else None, ops) for g in request.group_ids
    )
    return build(r.type, groups=groups)


HANDLER = Handler(
    api_key=77, min_version=1, max_version=1, handle=handle, name="ShareGroupDescribe"
)
