"""CreatePartitions (37): grow a topic to a new partition count."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.handlers.common import too_many_partitions
from broker.registry import Handler
from protocol.messages import build
from storage.errors import StorageError


def _grow(ctx: RequestContext, topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    info = ctx.services.logs.topic(topic.name)
    if info is None:
        return ErrorCode.unknown_topic_or_partition, None
    if topic.count <= info.partitions:
        return ErrorCode.invalid_partitions, f"topic has {info.partitions} partitions already"
    if validate_only:
        return ErrorCode.none, None
    try:
        ctx.services.logs.create_partitions(topic.name, topic.count)
    except StorageError as e:
        return e.error_code, str(e)
    return ErrorCode.none, None


def _added(ctx: RequestContext, topic: Any) -> int:
    info = ctx.services.logs.topic(topic.name)
    return max(0, topic.count - info.partitions) if info is not None else 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    results = []
    refused = too_many_partitions(ctx, sum(_added(ctx, t) for t in request.topics))
    for topic in request.topics:
        code, message = (
            (ErrorCode.invalid_partitions, refused)
            if refused
            else _grow(ctx, topic, request.validate_only)
        )
        results.append(
            build(
                r.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=code,
                error_message=message,
            )
        )
    return build(r.type, results=tuple(results))


HANDLER = Handler(api_key=37, min_version=0, max_version=3, handle=handle, name="CreatePartitions")
