"""DeleteGroups (42): empty share groups, empty classic and KIP-848 consumer groups, and
consumer groups that are only committed offsets.

Deleting a share group drops its share-partition state (see `share_group_offsets`), its group
configs and its share snapshot files. A classic group is forgotten by its coordinator and its
committed offsets are deleted by tombstones, as are those of an empty KIP-848 group (forgotten
by its coordinator too) and of a group that is only committed offsets (Kafka's "Empty"
group). A group with members gets NON_EMPTY_GROUP and keeps its offsets, an unknown one
GROUP_ID_NOT_FOUND, as Kafka answers (`GroupMetadataManager.validateDeleteGroup`).
"""

from __future__ import annotations

import structlog
from kio.schema.delete_groups import v0
from kio.schema.delete_groups import v1
from kio.schema.delete_groups import v2
from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_group_offsets import group_admin
from broker.slicing import sliced_map
from coordinator.group_registry import GroupKind
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError

log = structlog.get_logger("shoal.groups")
Request = v0.DeleteGroupsRequest | v1.DeleteGroupsRequest | v2.DeleteGroupsRequest


def _delete(ctx: RequestContext, group_id: str) -> ErrorCode:
    s = ctx.services
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    if s.groups.holds(GroupKind.CLASSIC, group_id):
        try:
            s.classic_groups.coordinator.delete_group(group_id)
        except CoordinatorError as e:
            return e.error_code
        return _delete_offsets(ctx, group_id)
    if s.groups.holds(GroupKind.CONSUMER, group_id):  # its offsets go only with the group
        try:
            s.consumer_groups.delete_group(group_id)
        except CoordinatorError as e:
            return e.error_code
        return _delete_offsets(ctx, group_id)
    if not s.groups.holds(GroupKind.SHARE, group_id) and s.offsets.has_group(group_id):
        return _delete_offsets(ctx, group_id)
    try:
        group_admin(s.coordinator, s.share_partitions).delete_group(group_id)
    except CoordinatorError as e:
        return e.error_code
    if s.config.ownership.is_controller:  # --processes N: node 0 alone writes group configs
        s.group_configs.forget_group(group_id)  # written before the answer (`durable`)
    try:
        ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms).delete_group(group_id)
    except StorageError as e:
        return e.error_code  # a tombstone was not written: deleting again finishes the job
    return ErrorCode.none


def _delete_offsets(ctx: RequestContext, group_id: str) -> ErrorCode:
    """Tombstones for the group's committed offsets (none: nothing to write)."""
    offsets = ctx.services.offsets
    if offsets.has_group(group_id):
        try:
            offsets.delete_group(group_id)
        except StorageError as e:
            return e.error_code  # deleting again finishes the job
    return ErrorCode.none


def _logged(ctx: RequestContext, group_id: str) -> ErrorCode:
    code = _delete(ctx, group_id)
    if code == ErrorCode.none:
        log.info("group deleted", group=group_id)
    return code


async def handle(ctx: RequestContext, request: Request) -> v2.DeleteGroupsResponse:
    results = await sliced_map(  # a request may name a million groups
        lambda g: v2.response.DeletableGroupResult(group_id=g, error_code=_logged(ctx, g)),
        request.groups_names,
    )
    await ctx.services.group_config_saves.durable(ctx.services.group_configs)
    return v2.DeleteGroupsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = handler(
    handle,
    v0.DeleteGroupsRequest,
    v1.DeleteGroupsRequest,
    v2.DeleteGroupsRequest,
    acl=((AclOperation.DELETE, ResourceType.GROUP),),
)
