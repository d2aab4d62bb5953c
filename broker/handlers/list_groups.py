"""ListGroups (16): share groups and classic consumer groups, with the states (v4+) and types
(v5+) filters (KIP-848).

A share group lists with type and protocol type "share" and state Stable (members) or Empty;
a KIP-848 consumer group with type and protocol type "consumer" and its state; a classic
group with type "classic", its members' protocol type ("consumer" for consumers) and its state
(Empty, PreparingRebalance, CompletingRebalance, Stable). A consumer group that is only
committed offsets lists with type and protocol type "consumer", state Empty. Filters match
case-insensitively.
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
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from coordinator.group_registry import GroupKind
from protocol.acl import AclOperation
from protocol.acl import ResourceType

DESCRIBE = AclOperation.DESCRIBE
CLASSIC = GroupKind.CLASSIC.value  # KIP-848's group type of a JoinGroup/SyncGroup group
GROUP_TYPES = frozenset(kind.value for kind in GroupKind)

Request = (
    v0.ListGroupsRequest
    | v1.ListGroupsRequest
    | v2.ListGroupsRequest
    | v3.ListGroupsRequest
    | v4.ListGroupsRequest
    | v5.ListGroupsRequest
)


def _classic(
    ctx: RequestContext, states: tuple[str, ...], types: tuple[str, ...]
) -> list[v5.response.ListedGroup]:
    if types and CLASSIC not in {t.lower() for t in types}:
        return []
    wanted = {s.lower() for s in states}
    return [
        v5.response.ListedGroup(
            group_id=GroupId(g.group_id),
            protocol_type=g.protocol_type or "",
            group_state=g.state.value,
            group_type=CLASSIC,
        )
        for g in ctx.services.classic_groups.coordinator
        if not wanted or g.state.value.lower() in wanted
    ]


async def _lowered(values: tuple[str, ...], slicer: Slicer) -> set[str]:
    """A filter's values in lower case, without repeats: a request may send a million."""
    out: set[str] = set()
    for value in values:
        out.add(value.lower())
        await slicer.pause()
    return out


def _types(wanted: set[str]) -> tuple[str, ...]:
    """The types filter reduced to the group types there are, with the same outcome: each
    kind of group asks whether its own type is in it."""
    if not wanted:
        return ()
    return tuple(wanted & GROUP_TYPES) or (next(iter(wanted)),)  # matching none of them


async def handle(ctx: RequestContext, request: Request) -> v5.ListGroupsResponse:
    slicer = Slicer()
    states: set[str] = set()
    types: tuple[str, ...] = ()
    if isinstance(request, (v4.ListGroupsRequest, v5.ListGroupsRequest)):
        states = await _lowered(request.states_filter, slicer)
    if isinstance(request, v5.ListGroupsRequest):
        types = _types(await _lowered(request.types_filter, slicer))
    # DESCRIBE on the cluster lists every group; else only those it may DESCRIBE (KIP-231).
    everything = authorize_cluster(ctx, DESCRIBE)
    s = ctx.services
    # Every state here, filtered below: each kind of group would otherwise lower the filter's
    # values again (a million, each); and a group of another state is known all the same.
    coordinated = s.share_group_admin.list_groups(types=types)
    coordinated += s.consumer_groups.list_groups((), types)
    classic = _classic(ctx, (), types)
    listed_ids = {g.group_id for g in coordinated} | {g.group_id for g in classic}

    def known(group_id: str) -> bool:
        return group_id in listed_ids or s.groups.holds(GroupKind.SHARE, group_id)

    listed = [
        v5.response.ListedGroup(
            group_id=GroupId(g.group_id),
            protocol_type=g.protocol_type,
            group_state=g.state,
            group_type=g.group_type,
        )
        for g in coordinated + s.offsets.empty_group_listings(known, (), types)
    ] + classic
    groups = tuple(
        g
        for g in sorted(listed, key=lambda g: g.group_id)
        if (not states or g.group_state.lower() in states)
        # `--processes N`: only what this node coordinates (Kafka's brokers list their own
        # shards); state a wrong node kept from before NOT_COORDINATOR is not its to list
        and not not_coordinator(ctx, g.group_id)
        and (everything or authorize(ctx, DESCRIBE, ResourceType.GROUP, g.group_id))
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
