"""CreatePartitions (37): grow a topic to a new partition count."""

from __future__ import annotations

import structlog
from kio.schema.create_partitions import v0
from kio.schema.create_partitions import v1
from kio.schema.create_partitions import v2
from kio.schema.create_partitions import v3
from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_CONTROLLER_MESSAGE
from broker.handlers.common import not_controller
from broker.handlers.common import too_many_partitions
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError

log = structlog.get_logger("shoal.topics")

Request = (
    v0.CreatePartitionsRequest
    | v1.CreatePartitionsRequest
    | v2.CreatePartitionsRequest
    | v3.CreatePartitionsRequest
)


async def _grow(
    ctx: RequestContext, name: str, count: int, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    if not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed, None
    if not_controller(ctx):
        return ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE
    info = ctx.services.logs.topic(name)
    if info is None:
        return ErrorCode.unknown_topic_or_partition, None
    if count <= info.partitions:
        return ErrorCode.invalid_partitions, f"topic has {info.partitions} partitions already"
    if validate_only:
        return ErrorCode.none, None
    s = ctx.services
    try:
        await s.topic_admin.create_partitions(s.logs, name, count, lambda _: log.info(
            "partitions added", topic=name, partitions=count, was=info.partitions))  # fmt: skip
    except StorageError as e:
        return e.error_code, str(e)
    return ErrorCode.none, None


def _added(ctx: RequestContext, name: str, count: int) -> int:
    info = ctx.services.logs.topic(name)
    return max(0, count - info.partitions) if info is not None else 0


async def handle(ctx: RequestContext, request: Request) -> v3.CreatePartitionsResponse:
    results = []
    slicer = Slicer()  # a request may name a million topics
    added = 0
    for t in request.topics:
        added += _added(ctx, t.name, t.count)
        await slicer.pause()
    refused = too_many_partitions(ctx, added)
    for topic in request.topics:
        code, message = (
            (ErrorCode.invalid_partitions, refused)
            if refused
            else await _grow(ctx, topic.name, topic.count, request.validate_only)
        )
        results.append(
            v3.response.CreatePartitionsTopicResult(
                name=topic.name, error_code=code, error_message=message
            )
        )
        await slicer.pause()
    return v3.CreatePartitionsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = handler(
    handle,
    v0.CreatePartitionsRequest,
    v1.CreatePartitionsRequest,
    v2.CreatePartitionsRequest,
    v3.CreatePartitionsRequest,
    acl=((AclOperation.ALTER, ResourceType.TOPIC),),
)
