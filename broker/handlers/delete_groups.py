"""DeleteGroups (42): empty share groups only.

Deleting a group drops its share-partition state (see `share_group_offsets`), its group
configs and its share snapshot files. A group with members gets NON_EMPTY_GROUP, an unknown
one GROUP_ID_NOT_FOUND, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_group_offsets import group_admin
from coordinator.share_group import CoordinatorError
from protocol.messages import build
from storage.errors import StorageError


def _delete(ctx: RequestContext, group_id: str) -> ErrorCode:
    s = ctx.services
    try:
        group_admin(s.coordinator, s.share_partitions).delete_group(group_id)
    except CoordinatorError as e:
        return e.error_code
    s.group_configs.delete_group(group_id)
    try:
        ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms).delete_group(group_id)
    except StorageError as e:
        return e.error_code  # a tombstone was not written: deleting again finishes the job
    return ErrorCode.none


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    results = tuple(
        build(r.DeletableGroupResult, group_id=g, error_code=_delete(ctx, g))
        for g in request.groups_names
    )
    return build(r.type, results=results)


HANDLER = Handler(api_key=42, min_version=0, max_version=2, handle=handle, name="DeleteGroups")
