"""Produce (0): validate batch headers, assign offsets, append the bytes as received.

No record is decoded here: the storage layer checks each batch's header and CRC and rewrites
only its base offset.
"""

from __future__ import annotations

from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from protocol.messages import build
from protocol.record_batch import InvalidRecordBatch
from storage.errors import StorageError

log = structlog.get_logger("shoal.produce")


def _append(
    ctx: RequestContext, topic: str, index: int, records: bytes | None
) -> tuple[ErrorCode, int, int, str | None]:
    """Error code, base offset, log start offset and error message for one partition."""
    partition_log = ctx.services.logs.log(topic, index)
    if partition_log is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1, None
    if not records:
        return ErrorCode.invalid_record, -1, -1, "no record batches"
    try:
        result = partition_log.append(records, now_ms=ctx.services.now_ms())
    except InvalidRecordBatch as e:
        log.info("rejected batch", topic=topic, partition=index, reason=str(e))
        return ErrorCode.corrupt_message, -1, -1, str(e)
    except StorageError as e:
        return e.error_code, -1, -1, str(e)
    ctx.services.notifier.notify((topic, index))
    return ErrorCode.none, result.base_offset, result.log_start_offset, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    topics = []
    for topic in request.topic_data:
        partitions = []
        for p in topic.partition_data:
            code, base, start, message = _append(ctx, topic.name, p.index, p.records)
            partitions.append(
                build(
                    r.PartitionProduceResponse,
                    index=p.index,
                    error_code=code,
                    base_offset=base,
                    log_append_time=None,
                    log_start_offset=start,
                    record_errors=(),
                    error_message=message,
                )
            )
        topics.append(
            build(r.TopicProduceResponse, name=topic.name, partition_responses=tuple(partitions))
        )
    if request.acks == 0:
        return None
    return build(r.type, responses=tuple(topics))


HANDLER = Handler(api_key=0, min_version=3, max_version=12, handle=handle, name="Produce")
