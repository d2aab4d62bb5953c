"""DeleteGroups (42): empty share groups, empty classic and KIP-848 consumer groups, and
consumer groups that are only committed offsets.

Deleting a share group drops its share-partition state (see `share_group_offsets`), its group
configs and its share snapshot files. A classic group is forgotten by its coordinator and its
committed offsets are deleted by tombstones, as are those of an empty KIP-848 group (forgotten
by its coordinator too) and of a group that is only committed offsets (Kafka's "Empty"
group). A group with members gets NON_EMPTY_GROUP and keeps its offsets, an unknown one
GROUP_ID_NOT_FOUND, as Kafka answers (`GroupMetadataManager.validateDeleteGroup`).

The deletions run to their end if the client goes (`broker.to_the_end`), as Kafka's
coordinator writes a DeleteGroups' tombstones whatever became of the request: a share group
is forgotten by its coordinator first and its share-partitions dropped a slice at a time
after, so a request cancelled between them left a group half deleted (the rest of its state,
its configs forgotten in memory and not on disk).
"""

from __future__ import annotations

import structlog
from kio.schema.delete_groups import v0
from kio.schema.delete_groups import v1
from kio.schema.delete_groups import v2
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs import v1 as incremental_alter_configs
from kio.static.primitive import i8

from broker import share_admin_remote as remote
from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.ownership import CONTROLLER
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.slicing import Slicer
from coordinator.group_registry import GroupKind
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError

log = structlog.get_logger("shoal.groups")
GROUP_RESOURCE, DELETE = 32, 1  # ConfigResource type GROUP; IncrementalAlterConfigs DELETE
Request = v0.DeleteGroupsRequest | v1.DeleteGroupsRequest | v2.DeleteGroupsRequest


async def _delete(ctx: RequestContext, group_id: str) -> ErrorCode:
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
    return await _delete_share_group(ctx, group_id)


async def _delete_share_group(ctx: RequestContext, group_id: str) -> ErrorCode:
    s = ctx.services
    try:
        s.share_group_admin.delete_group(group_id)
    except CoordinatorError as e:
        return e.error_code
    if s.config.ownership.is_controller:  # --processes N: node 0 alone writes group configs
        s.group_configs.forget_group(group_id)  # written before the answer (`durable`)

    def still_empty() -> bool:
        group = s.coordinator.groups.get(group_id)
        return group is None or not group.members

    try:
        offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
        if not await offsets.delete_group(group_id, still_empty):
            return ErrorCode.non_empty_group  # a member came back while its state went
        s.share_groups.forget(group_id)  # --processes N: its record, last (a tombstone)
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


async def _logged(ctx: RequestContext, group_id: str) -> ErrorCode:
    code = await _delete(ctx, group_id)
    if code == ErrorCode.none:
        log.info("group deleted", group=group_id)
    return code


def _share_group_to_delete(ctx: RequestContext, group_id: str) -> bool:
    """Whether `_delete` would delete this group as a share group (an empty one)."""
    s = ctx.services
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return False
    if s.groups.holds(GroupKind.CLASSIC, group_id) or s.groups.holds(GroupKind.CONSUMER, group_id):
        return False
    if not s.groups.holds(GroupKind.SHARE, group_id) and s.offsets.has_group(group_id):
        return False
    try:
        s.share_group_admin.require_empty(group_id)
    except CoordinatorError:
        return False  # `_delete` answers the error
    return True


async def _delete_elsewhere(ctx: RequestContext, group_id: str) -> ErrorCode:
    """`--processes N`: before an empty share group is deleted here, node 0 forgets its
    configs (it alone writes them: IncrementalAlterConfigs DELETE of each, when it is not this
    process), durably, so that every leader's tombstones start where the defaults say, as with
    one process; then every other leader forgets its share-partitions (DeleteShareGroupState,
    as Kafka's coordinator deletes a share group's state through its persister before the
    group, `deleteShareGroups`). An error keeps the group, as Kafka keeps a share group whose
    state deletion failed: deleting again finishes the job."""
    s = ctx.services
    if not _share_group_to_delete(ctx, group_id):
        return ErrorCode.none
    if s.config.ownership.is_controller:  # forgotten first: the leaders' tombstones start
        s.group_configs.forget_group(group_id)  # where the defaults say, as ours
        await s.group_config_saves.durable(s.group_configs)
    else:
        code = await _forget_configs_on_controller(ctx, group_id)
        if code != ErrorCode.none:
            return code
    parts = await remote.partitions_led_elsewhere(s)
    answers = await remote.deletes(s, group_id, parts) if parts else {}
    for code in answers.values():
        if code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
            return code  # UNKNOWN_TOPIC_OR_PARTITION: a topic deleted meanwhile
    return ErrorCode.none


async def _forget_configs_on_controller(ctx: RequestContext, group_id: str) -> ErrorCode:
    s = ctx.services
    s.group_configs.reload()  # what node 0 wrote last (one stat when nothing changed)
    stored = s.group_configs.stored(group_id)
    if not stored:
        return ErrorCode.none
    assert s.node_links is not None
    m = incremental_alter_configs.request
    request = incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=(
            m.AlterConfigsResource(
                resource_type=i8(GROUP_RESOURCE), resource_name=group_id,
                configs=tuple(m.AlterableConfig(name=n, config_operation=i8(DELETE), value=None)
                              for n in stored),
            ),
        ),
        validate_only=False,
    )  # fmt: skip
    try:
        answer = await s.node_links.request(CONTROLLER, request, remote.ADMIN_TIMEOUT_S)
    except (OSError, TimeoutError):
        return ErrorCode.coordinator_not_available
    code = ErrorCode(answer.responses[0].error_code) if answer.responses else ErrorCode.none
    if code != ErrorCode.none:
        log.warning("node 0 did not forget a deleted group's configs", group=group_id,
                    error=code.name)  # fmt: skip
        return code
    s.group_configs.reload()  # this process's own share-partitions start from the defaults
    return ErrorCode.none


async def handle(ctx: RequestContext, request: Request) -> v2.DeleteGroupsResponse:
    return await ctx.services.changes.to_the_end(_delete_all(ctx, request))


async def _delete_all(ctx: RequestContext, request: Request) -> v2.DeleteGroupsResponse:
    results = []
    slicer = Slicer()  # a request may name a million groups
    for g in request.groups_names:
        code = ErrorCode.none
        if not_coordinator(ctx, g) and authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, g):
            code = ErrorCode.not_coordinator  # nothing deleted here, nor asked of the others
        elif ctx.services.node_links is not None:  # --processes N: other processes hold share
            code = await _delete_elsewhere(ctx, g)  # state and configs of the group
        if code == ErrorCode.none:
            code = await _logged(ctx, g)
        results.append(v2.response.DeletableGroupResult(group_id=g, error_code=code))
        await slicer.pause()
    await ctx.services.group_config_saves.durable(ctx.services.group_configs)
    return v2.DeleteGroupsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = handler(
    handle,
    v0.DeleteGroupsRequest,
    v1.DeleteGroupsRequest,
    v2.DeleteGroupsRequest,
    acl=((AclOperation.DELETE, ResourceType.GROUP),),
)
