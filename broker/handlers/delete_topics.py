"""DeleteTopics (20): by name, or by topic id from v6."""

from __future__ import annotations

import uuid

import structlog
from kio.schema.delete_topics import v1
from kio.schema.delete_topics import v2
from kio.schema.delete_topics import v3
from kio.schema.delete_topics import v4
from kio.schema.delete_topics import v5
from kio.schema.delete_topics import v6
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_controller
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError
from storage.errors import UnknownTopicOrPartition
from storage.topics import TopicInfo

log = structlog.get_logger("shoal.topics")

Request = (
    v1.DeleteTopicsRequest
    | v2.DeleteTopicsRequest
    | v3.DeleteTopicsRequest
    | v4.DeleteTopicsRequest
    | v5.DeleteTopicsRequest
    | v6.DeleteTopicsRequest
)


def _targets(request: Request) -> list[tuple[TopicName | None, uuid.UUID | None]]:
    if isinstance(request, v6.DeleteTopicsRequest):
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, None) for name in request.topic_names]


async def _delete(
    ctx: RequestContext, name: TopicName | None, topic_id: uuid.UUID | None
) -> tuple[ErrorCode, TopicInfo | None]:
    """Delete one topic; the topic is returned only when the principal may see it."""
    logs = ctx.services.logs
    if name and not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed, None
    if not_controller(ctx):
        return ErrorCode.not_controller, None
    info = logs.topic(name) if name else logs.topic_by_id(topic_id) if topic_id else None
    if info is None:
        return (ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id), None
    if not name and not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, info.name):
        return ErrorCode.topic_authorization_failed, None
    try:
        await ctx.services.topic_admin.delete_topic(logs, info.name, lambda _: _forget(ctx, info))
    except UnknownTopicOrPartition:  # deleted meanwhile, by another request
        return (ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id), None
    return ErrorCode.none, info


def _forget(ctx: RequestContext, info: TopicInfo) -> None:
    """What goes with a deleted topic, run by the deletion itself (`TopicAdmin`), even when
    the client that asked has gone: its committed offsets (a topic made again under the name
    must not start a group at the old offsets), its share state and its metrics."""
    log.info("topic deleted", topic=info.name, topic_id=str(info.topic_id))
    ctx.services.share_partitions.forget_topic(info.name, info.topic_id)
    ctx.services.metrics.forget_topic(info.name)
    try:
        ctx.services.offsets.delete_topic(info.name)
    except StorageError as e:  # the topic is gone; its offsets stay until deleted by hand
        log.error("committed offsets of a deleted topic not deleted", topic=info.name,
                  error=str(e))  # fmt: skip


async def handle(ctx: RequestContext, request: Request) -> v6.DeleteTopicsResponse:
    results = []
    slicer = Slicer()  # a request may name a million topics
    for name, topic_id in _targets(request):
        await slicer.pause()
        code, info = await _delete(ctx, name, topic_id)
        results.append(
            v6.response.DeletableTopicResult(
                name=TopicName(info.name) if info else name,
                topic_id=info.topic_id if info else topic_id,
                error_code=code,
            )
        )
    return v6.DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(results))


HANDLER = handler(
    handle,
    v1.DeleteTopicsRequest,
    v2.DeleteTopicsRequest,
    v3.DeleteTopicsRequest,
    v4.DeleteTopicsRequest,
    v5.DeleteTopicsRequest,
    v6.DeleteTopicsRequest,
    acl=((AclOperation.DELETE, ResourceType.TOPIC),),
)
