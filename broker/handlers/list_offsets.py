"""ListOffsets (2): earliest (-2), latest (-1), the record with the largest timestamp (-3), the
earliest local offset (-4), the latest tiered offset (-5), or the first offset at or after a
timestamp.

v1-10 (Kafka 4 serves 1-11; v11 brings -6, the earliest offset waiting for tiered storage).
Each special timestamp may be asked from the version that brought it, as Kafka's ReplicaManager
checks (`timestampMinSupportedVersion`); before it, or an unknown one, the partition is answered
UNSUPPORTED_VERSION. With read_committed (v2+) the latest offset is the last stable offset, as
Kafka answers it. Nothing here is tiered, as a Kafka log without remote storage: the earliest
local offset is the log start and the latest tiered offset is -1 (UnifiedLog
`fetchOffsetByTimestamp`). v10's timeout is for remote reads: none here.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode
from kio.schema.list_offsets import v1
from kio.schema.list_offsets import v2
from kio.schema.list_offsets import v3
from kio.schema.list_offsets import v4
from kio.schema.list_offsets import v5
from kio.schema.list_offsets import v6
from kio.schema.list_offsets import v7
from kio.schema.list_offsets import v8
from kio.schema.list_offsets import v9
from kio.schema.list_offsets import v10
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import missing_partition
from broker.log_loading import open_first
from broker.read_committed import READ_COMMITTED
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import CorruptRecords
from storage.log import PartitionLog

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
# Each try that meets a damaged batch holding the maximum records it; the next steps over it.
MAX_TIMESTAMP_TRIES = 8
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# The version each special timestamp came with: asked in an older one, it is refused.
SPECIAL_SINCE = {LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}

Request = (
    v1.ListOffsetsRequest
    | v2.ListOffsetsRequest
    | v3.ListOffsetsRequest
    | v4.ListOffsetsRequest
    | v5.ListOffsetsRequest
    | v6.ListOffsetsRequest
    | v7.ListOffsetsRequest
    | v8.ListOffsetsRequest
    | v9.ListOffsetsRequest
    | v10.ListOffsetsRequest
)


async def _max_timestamp(plog: PartitionLog) -> tuple[int, int] | None:
    for _ in range(MAX_TIMESTAMP_TRIES):
        for _ in plog.learn_data_max():  # done already, unless a segment needs a walk
            await asyncio.sleep(0)  # between slices of it: the loop is never held long
        try:
            return plog.offset_for_max_timestamp()
        except CorruptRecords:  # its batch was damaged (logged, counted): learn again
            continue
    return None


async def _lookup(
    ctx: RequestContext, topic: str, partition: int, timestamp: int, version: int,
    committed: bool = False,
) -> tuple[ErrorCode, int, int]:  # fmt: skip
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
        return ErrorCode.topic_authorization_failed, -1, -1
    if timestamp < 0 and version < SPECIAL_SINCE.get(timestamp, 1 << 15):
        return ErrorCode.unsupported_version, -1, -1
    plog = ctx.services.logs.log(topic, partition)
    if plog is None:
        return missing_partition(ctx, topic, partition), -1, -1
    if timestamp == LATEST:  # read_committed: the last stable offset (UnifiedLog LSO)
        return ErrorCode.none, -1, plog.last_stable_offset if committed else plog.log_end_offset
    if timestamp in (EARLIEST, EARLIEST_LOCAL):  # every segment is local
        return ErrorCode.none, -1, plog.log_start_offset
    if timestamp == LATEST_TIERED:  # nothing is tiered
        return ErrorCode.none, -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = await _max_timestamp(plog)
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None:  # no such record (an empty log, for MAX_TIMESTAMP): Kafka's -1, -1
        return ErrorCode.none, -1, -1
    offset, ts = found
    return ErrorCode.none, ts, offset


async def handle(ctx: RequestContext, request: Request) -> v10.ListOffsetsResponse:
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED  # v2+
    topics = []
    slicer = Slicer()  # a request may name a million partitions
    if ctx.services.logs.loading:  # just started: open the logs named first, in slices
        named = ((t.name, p.partition_index) for t in request.topics for p in t.partitions)
        await open_first(ctx.services.logs, named)
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, ts, offset = await _lookup(
                ctx, topic.name, p.partition_index, p.timestamp, ctx.version, committed
            )
            partitions.append(
                v10.response.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=i64(ts),
                    offset=i64(offset),
                    leader_epoch=i32(0 if code == ErrorCode.none else -1),
                )
            )
            await slicer.pause()
        topics.append(
            v10.response.ListOffsetsTopicResponse(name=topic.name, partitions=tuple(partitions))
        )
    return v10.ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = handler(
    handle,
    v1.ListOffsetsRequest,
    v2.ListOffsetsRequest,
    v3.ListOffsetsRequest,
    v4.ListOffsetsRequest,
    v5.ListOffsetsRequest,
    v6.ListOffsetsRequest,
    v7.ListOffsetsRequest,
    v8.ListOffsetsRequest,
    v9.ListOffsetsRequest,
    v10.ListOffsetsRequest,
    acl=((AclOperation.DESCRIBE, ResourceType.TOPIC),),
)
