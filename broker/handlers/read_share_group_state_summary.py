"""ReadShareGroupStateSummary (87): a share-partition's start offset, as the group's
coordinator asks each partition's leader for DescribeShareGroupOffsets (`--processes N`;
Kafka's `GroupCoordinatorService.describeShareGroupOffsets` asks the share coordinator so,
through `DefaultStatePersister.readSummary`).

Only from another node of the set (`broker/share_state_peer.py`). A share-partition the group
never started answers StartOffset -1 and DeliveryCompleteCount -1 without an error, as Kafka's
share coordinator does for a key it has no state for; a started one its SPSO, the offsets of
its window that are delivery-complete, and in the success error_message the lag and Shoal's
extra detail (`PartitionOffsets.summary`), which the coordinator copies into its answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from kio.schema.errors import ErrorCode
from kio.schema.read_share_group_state_summary import v0
from kio.schema.read_share_group_state_summary import v1
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.context import RequestContext
from broker.lag_readings import learn_non_data
from broker.registry import handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share_state_peer import StateTopic
from broker.share_state_peer import from_peer
from broker.share_state_peer import led_partition
from broker.share_state_peer import per_partition
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = v0.ReadShareGroupStateSummaryRequest | v1.ReadShareGroupStateSummaryRequest
Result = v1.response.PartitionResult
PartitionData = v0.request.PartitionData | v1.request.PartitionData


def _error(p: int, code: ErrorCode, message: str | None = None) -> Result:
    return Result(partition=i32(p), error_code=code, error_message=message, state_epoch=i32(0),
                  leader_epoch=i32(0), start_offset=i64(-1))  # fmt: skip


async def _partition(
    ctx: RequestContext, offsets: ShareGroupOffsets, group_id: str, topic_id: uuid.UUID | None,
    p: int,
) -> Result:  # fmt: skip
    topic, code = led_partition(ctx, topic_id, p)
    if topic is None:
        return _error(p, code)
    plog = ctx.services.logs.log(topic.name, p)
    if plog is not None:  # a segment sealed before non-data ranges were kept
        await learn_non_data(plog)
    described = offsets.describe(group_id, topic, p)
    if described.start_offset < 0:
        return _error(p, ErrorCode.none)
    complete = described.acknowledged + described.archived + described.control
    return Result(partition=i32(p), error_code=ErrorCode.none, error_message=described.summary(),
                  state_epoch=i32(0), leader_epoch=i32(0),
                  start_offset=i64(described.start_offset),
                  delivery_complete_count=i32(min(complete, 2**31 - 1)))  # fmt: skip


async def handle(ctx: RequestContext, request: Request) -> v1.ReadShareGroupStateSummaryResponse:
    allowed = from_peer(ctx)
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)

    async def answer(topic_id: uuid.UUID | None, pd: PartitionData) -> Result:
        if not allowed:
            return _error(pd.partition, ErrorCode.cluster_authorization_failed)
        if not request.group_id:
            return _error(pd.partition, ErrorCode.invalid_request, "no group id")
        return await _partition(ctx, offsets, request.group_id, topic_id, pd.partition)

    topics: Iterable[StateTopic[PartitionData]] = request.topics  # v0's or v1's
    results = await per_partition(topics, answer, lambda topic_id, rows: (
        v1.response.ReadStateSummaryResult(topic_id=topic_id, partitions=rows)))  # fmt: skip
    return v1.ReadShareGroupStateSummaryResponse(results=results)


HANDLER = handler(
    handle,
    v0.ReadShareGroupStateSummaryRequest,
    v1.ReadShareGroupStateSummaryRequest,
    acl=((AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),),
)
