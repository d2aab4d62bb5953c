"""DeleteRecords (21): move each partition's log start (low watermark) up to an offset."""

from __future__ import annotations

from kio.schema.delete_records import v0
from kio.schema.delete_records import v1
from kio.schema.delete_records import v2
from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = v0.DeleteRecordsRequest | v1.DeleteRecordsRequest | v2.DeleteRecordsRequest


async def handle(ctx: RequestContext, request: Request) -> v2.DeleteRecordsResponse:
    deletion = ctx.services.record_deletion
    topics = []
    slicer = Slicer()  # a request may name a million partitions
    for topic in request.topics:
        allowed = authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        results = []
        for p in topic.partitions:
            if allowed:
                code, low = await deletion.delete_records(topic.name, p.partition_index, p.offset)
            else:
                code, low = ErrorCode.topic_authorization_failed, -1
            results.append(
                v2.response.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=i64(low), error_code=code
                )
            )
            await slicer.pause()
        topics.append(
            v2.response.DeleteRecordsTopicResult(name=topic.name, partitions=tuple(results))
        )
    return v2.DeleteRecordsResponse(throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = handler(
    handle,
    v0.DeleteRecordsRequest,
    v1.DeleteRecordsRequest,
    v2.DeleteRecordsRequest,
    acl=((AclOperation.DELETE, ResourceType.TOPIC),),
)
