"""ListOffsets (2): earliest (-2), latest (-1), the record with the largest timestamp (-3), or
the first offset at or after a timestamp."""

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
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3

Request = (
    v1.ListOffsetsRequest
    | v2.ListOffsetsRequest
    | v3.ListOffsetsRequest
    | v4.ListOffsetsRequest
    | v5.ListOffsetsRequest
    | v6.ListOffsetsRequest
    | v7.ListOffsetsRequest
    | v8.ListOffsetsRequest
)


async def _lookup(
    ctx: RequestContext, topic: str, partition: int, timestamp: int
) -> tuple[ErrorCode, int, int]:
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
        return ErrorCode.topic_authorization_failed, -1, -1
    plog = ctx.services.logs.log(topic, partition)
    if plog is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1
    if timestamp == LATEST:
        return ErrorCode.none, -1, plog.log_end_offset
    if timestamp == EARLIEST:
        return ErrorCode.none, -1, plog.log_start_offset
    if timestamp == MAX_TIMESTAMP:
        for _ in plog.learn_data_max():  # done already, unless an older segment needs a walk
            await asyncio.sleep(0)  # between slices of it: the loop is never held long
        found = plog.offset_for_max_timestamp()
    elif timestamp < 0:
        return ErrorCode.none, -1, plog.log_end_offset  # -4 and below: newer specials, latest
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None:  # no such record (an empty log, for MAX_TIMESTAMP): Kafka's -1, -1
        return ErrorCode.none, -1, -1
    offset, ts = found
    return ErrorCode.none, ts, offset


async def handle(ctx: RequestContext, request: Request) -> v8.ListOffsetsResponse:
    topics = []
    slicer = Slicer()  # a request may name a million partitions
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, ts, offset = await _lookup(ctx, topic.name, p.partition_index, p.timestamp)
            partitions.append(
                v8.response.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=i64(ts),
                    offset=i64(offset),
                    leader_epoch=i32(0 if code == ErrorCode.none else -1),
                )
            )
            await slicer.pause()
        topics.append(
            v8.response.ListOffsetsTopicResponse(name=topic.name, partitions=tuple(partitions))
        )
    return v8.ListOffsetsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


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
    acl=((AclOperation.DESCRIBE, ResourceType.TOPIC),),
)
