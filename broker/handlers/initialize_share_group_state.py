"""InitializeShareGroupState (83): start a share-partition at an offset, as the group's
coordinator asks each partition's leader for AlterShareGroupOffsets (`--processes N`; Kafka's
`GroupCoordinatorService.alterShareGroupOffsets` initialises the share-partitions it resets
through `DefaultStatePersister.initializeState`).

Only from another node of the set (`broker/share_state_peer.py`). The share-partition is reset
by the code AlterShareGroupOffsets uses for the coordinator's own partitions
(`ShareGroupOffsets.reset`: every in-flight state dropped, the start clamped to the log, a
SHARE_CHECKPOINT written before the answer). The coordinator has checked that the group is
empty; StateEpoch is not kept (Shoal's checkpoints count their own epochs).
"""

from __future__ import annotations

import uuid

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.initialize_share_group_state import v0
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share_state_peer import from_peer
from broker.share_state_peer import led_partition
from broker.share_state_peer import per_partition_code
from protocol.acl import AclOperation
from protocol.acl import ResourceType

log = structlog.get_logger("shoal.groups")
r = v0.response


def _reset(ctx: RequestContext, offsets: ShareGroupOffsets, group_id: str,
           topic_id: uuid.UUID | None, p: v0.request.PartitionData) -> ErrorCode:  # fmt: skip
    if not group_id or p.start_offset < 0:
        return ErrorCode.invalid_request
    topic, code = led_partition(ctx, topic_id, p.partition)
    if topic is None:
        return code
    code = offsets.reset(group_id, topic, p.partition, p.start_offset)
    if code == ErrorCode.none:
        log.info("share group offset reset", group=group_id, topic=topic.name,
                 partition=p.partition, start_offset=p.start_offset)  # fmt: skip
    return code


async def handle(
    ctx: RequestContext, request: v0.InitializeShareGroupStateRequest
) -> v0.InitializeShareGroupStateResponse:
    allowed = from_peer(ctx)
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    results = await per_partition_code(
        allowed, request.topics, lambda tid, p: _reset(ctx, offsets, request.group_id, tid, p),
        lambda p, code: r.PartitionResult(partition=i32(p.partition), error_code=code),
        lambda tid, rows: r.InitializeStateResult(topic_id=tid, partitions=rows),
    )  # fmt: skip
    return v0.InitializeShareGroupStateResponse(results=results)


HANDLER = handler(
    handle,
    v0.InitializeShareGroupStateRequest,
    acl=((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),),
)
