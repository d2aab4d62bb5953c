"""ListOffsets (2): earliest (-2), latest (-1), or the first offset at or after a timestamp."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from protocol.messages import build

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def _lookup(
    ctx: RequestContext, topic: str, partition: int, timestamp: int
) -> tuple[ErrorCode, int, int]:
    plog = ctx.services.logs.log(topic, partition)
    if plog is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1
    if timestamp == LATEST:
        return ErrorCode.none, -1, plog.log_end_offset
    if timestamp == EARLIEST:
        return ErrorCode.none, -1, plog.log_start_offset
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:
        return (
            ErrorCode.none,
            -1,
            plog.log_end_offset,
        )  # -4 and below: newer specials, answer latest
    found = plog.offset_for_timestamp(2**63 - 1 if timestamp == MAX_TIMESTAMP else timestamp)
    if found is None:
        return ErrorCode.none, -1, -1 if timestamp != MAX_TIMESTAMP else plog.log_end_offset
    offset, ts = found
    return ErrorCode.none, ts, offset


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            code, ts, offset = _lookup(ctx, topic.name, p.partition_index, p.timestamp)
            partitions.append(
                build(
                    r.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=0 if code == ErrorCode.none else -1,
                )
            )
        topics.append(
            build(r.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions))
        )
    return build(r.type, topics=tuple(topics))


HANDLER = Handler(api_key=2, min_version=1, max_version=8, handle=handle, name="ListOffsets")
