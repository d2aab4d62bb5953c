"""ListGroups (16): share groups, with the states (v4+) and types (v5+) filters.

A share group lists with type and protocol type "share" and state Stable (members) or Empty;
a KIP-848 consumer group with type and protocol type "consumer" and its state.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.list_groups import v0
from kio.schema.list_groups import v1
from kio.schema.list_groups import v2
from kio.schema.list_groups import v3
from kio.schema.list_groups import v4
from kio.schema.list_groups import v5
from kio.schema.types import GroupId

from broker.authorization import authorize
from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.share.share_group_offsets import group_admin
from protocol.acl import AclOperation
from protocol.acl import ResourceType

DESCRIBE = AclOperation.DESCRIBE

Request = (
    v0.ListGroupsRequest
    | v1.ListGroupsRequest
    | v2.ListGroupsRequest
    | v3.ListGroupsRequest
    | v4.ListGroupsRequest
    | v5.ListGroupsRequest
)


async def handle(ctx: RequestContext, request: Request) -> v5.ListGroupsResponse:
    states: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    if isinstance(request, (v4.ListGroupsRequest, v5.ListGroupsRequest)):
        states = request.states_filter
    if isinstance(request, v5.ListGroupsRequest):
        types = request.types_filter
    # DESCRIBE on the cluster lists every group; else only those it may DESCRIBE (KIP-231).
    everything = authorize_cluster(ctx, DESCRIBE)
    s = ctx.services
    listed = group_admin(s.coordinator, s.share_partitions).list_groups(states, types)
    listed += s.consumer_groups.list_groups(states, types)
    groups = tuple(
        v5.response.ListedGroup(
            group_id=GroupId(g.group_id),
            protocol_type=g.protocol_type,
            group_state=g.state,
            group_type=g.group_type,
        )
        for g in listed
        if everything or authorize(ctx, DESCRIBE, ResourceType.GROUP, g.group_id)
    )
    return v5.ListGroupsResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups
    )


HANDLER = handler(
    handle,
    v0.ListGroupsRequest,
    v1.ListGroupsRequest,
    v2.ListGroupsRequest,
    v3.ListGroupsRequest,
    v4.ListGroupsRequest,
    v5.ListGroupsRequest,
    acl=((DESCRIBE, ResourceType.CLUSTER), (DESCRIBE, ResourceType.GROUP)),
)
