"""Produce (0): validate batch headers, assign offsets, append the bytes as received.

No record is decoded here: the storage layer checks each batch's header and CRC and rewrites
only its base offset.
"""

from __future__ import annotations

from typing import cast

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.produce import v3
from kio.schema.produce import v4
from kio.schema.produce import v5
from kio.schema.produce import v6
from kio.schema.produce import v7
from kio.schema.produce import v8
from kio.schema.produce import v9
from kio.schema.produce import v10
from kio.schema.produce import v11
from kio.schema.produce import v12
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.record_batch import InvalidRecordBatch
from storage.errors import InvalidRecord
from storage.errors import StorageError

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.produce")

Request = (
    v3.ProduceRequest
    | v4.ProduceRequest
    | v5.ProduceRequest
    | v6.ProduceRequest
    | v7.ProduceRequest
    | v8.ProduceRequest
    | v9.ProduceRequest
    | v10.ProduceRequest
    | v11.ProduceRequest
    | v12.ProduceRequest
)


def _append(
    ctx: RequestContext, topic: str, index: int, records: bytes | None
) -> tuple[ErrorCode, int, int, str | None]:
    """Error code, base offset, log start offset and error message for one partition."""
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic):
        return ErrorCode.topic_authorization_failed, -1, -1, None
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
    except InvalidRecord as e:
        log.info("rejected records", topic=topic, partition=index, reason=str(e))
        return e.error_code, -1, -1, str(e)
    except StorageError as e:
        return e.error_code, -1, -1, str(e)
    ctx.services.notifier.notify((topic, index))
    ctx.services.metrics.on_bytes_in(topic, len(records))
    return ErrorCode.none, result.base_offset, result.log_start_offset, None


# v3-v9 are answered with v9's classes; v10-v12 each with its own, whose tagged
# `current_leader` default is an entity of that version (protocol.messages.entity_tagged_defaults).
RESPONSES = {10: v10.response, 11: v11.response, 12: v12.response}
Response = v9.ProduceResponse | v10.ProduceResponse | v11.ProduceResponse | v12.ProduceResponse


async def handle(ctx: RequestContext, request: Request) -> Response | None:
    m = RESPONSES.get(request.__version__, v9.response)
    topics = []
    for topic in request.topic_data:
        partitions = []
        for p in topic.partition_data:
            code, base, start, message = _append(ctx, topic.name, p.index, p.records)
            partitions.append(
                m.PartitionProduceResponse(
                    index=p.index,
                    error_code=code,
                    base_offset=i64(base),
                    log_start_offset=i64(start),
                    record_errors=(),
                    error_message=message,
                )
            )
        topics.append(
            m.TopicProduceResponse(name=topic.name, partition_responses=tuple(partitions))
        )
    if request.acks == 0:
        return None
    return cast(Response, m.ProduceResponse(responses=tuple(topics), throttle_time=NO_THROTTLE))


HANDLER = handler(
    handle,
    v3.ProduceRequest,
    v4.ProduceRequest,
    v5.ProduceRequest,
    v6.ProduceRequest,
    v7.ProduceRequest,
    v8.ProduceRequest,
    v9.ProduceRequest,
    v10.ProduceRequest,
    v11.ProduceRequest,
    v12.ProduceRequest,
    responses=(v9.ProduceResponse, *(m.ProduceResponse for m in RESPONSES.values())),
    acl=((AclOperation.WRITE, ResourceType.TOPIC),),
)
