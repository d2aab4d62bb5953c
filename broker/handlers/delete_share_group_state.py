"""DeleteShareGroupState (86): forget share-partitions, as the group's coordinator asks each
partition's leader for DeleteShareGroupOffsets and DeleteGroups (`--processes N`; Kafka's
`GroupCoordinatorService.deleteShareGroupOffsets` and `deleteShareGroups` through
`DefaultStatePersister.deleteState`).

Only from another node of the set (`broker/share_state_peer.py`). Each share-partition is
deleted by the code the coordinator uses for its own (`ShareGroupOffsets.delete`: a tombstone
checkpoint, no snapshot file, nothing in memory); one the group never started is nothing to do
(NONE, as Kafka's share coordinator answers for a key it has no state for). The group configs
are read again first: a deleted group's tombstone starts where the defaults say, once node 0
has forgotten its configs.
"""

from __future__ import annotations

import uuid

import structlog
from kio.schema.delete_share_group_state import v0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share_state_peer import from_peer
from broker.share_state_peer import led_partition
from broker.share_state_peer import per_partition_code
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError

log = structlog.get_logger("shoal.groups")
r = v0.response


def _delete(ctx: RequestContext, offsets: ShareGroupOffsets, group_id: str,
            topic_id: uuid.UUID | None, partition: int) -> ErrorCode:  # fmt: skip
    if not group_id:
        return ErrorCode.invalid_request
    topic, code = led_partition(ctx, topic_id, partition)
    if topic is None:
        return code
    if not offsets.initialised(group_id, topic, partition):
        return ErrorCode.none
    try:
        offsets.delete(group_id, topic, partition)
    except StorageError as e:
        return e.error_code
    log.info("share group offsets deleted", group=group_id, topic=topic.name,
             partitions=[partition])  # fmt: skip
    return ErrorCode.none


async def handle(
    ctx: RequestContext, request: v0.DeleteShareGroupStateRequest
) -> v0.DeleteShareGroupStateResponse:
    allowed = from_peer(ctx)
    s = ctx.services
    if allowed and not s.config.ownership.is_controller:  # node 0 writes them; we read
        s.group_configs.reload()  # one stat when nothing changed
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    results = await per_partition_code(
        allowed, request.topics,
        lambda tid, p: _delete(ctx, offsets, request.group_id, tid, p.partition),
        lambda p, code: r.PartitionResult(partition=i32(p.partition), error_code=code),
        lambda tid, rows: r.DeleteStateResult(topic_id=tid, partitions=rows),
    )  # fmt: skip
    return v0.DeleteShareGroupStateResponse(results=results)


HANDLER = handler(
    handle,
    v0.DeleteShareGroupStateRequest,
    acl=((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),),
)
