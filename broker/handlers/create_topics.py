"""CreateTopics (19)."""

from __future__ import annotations

from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.handlers.common import too_many_partitions
from broker.registry import Handler
from protocol.messages import build
from storage.errors import StorageError

log = structlog.get_logger("shoal.topics")


def _create(
    ctx: RequestContext, topic: Any, validate_only: bool
) -> tuple[ErrorCode, str | None, Any]:
    n = topic.num_partitions
    partitions = ctx.services.config["num.partitions"] if n == -1 else n
    if topic.replication_factor not in (-1, 1):
        return ErrorCode.invalid_replication_factor, "a single broker keeps one replica", None
    if partitions <= 0:
        return ErrorCode.invalid_partitions, f"{partitions} partitions", None
    if ctx.services.logs.topic(topic.name) is not None:
        return ErrorCode.topic_already_exists, f"topic {topic.name!r} already exists", None
    if validate_only:
        return ErrorCode.none, None, None
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        return ErrorCode.none, None, ctx.services.logs.create_topic(topic.name, partitions, configs)
    except StorageError as e:
        return e.error_code, str(e), None


def _requested(ctx: RequestContext, topic: Any) -> int:
    """Partitions a topic of the request asks for (invalid counts add none)."""
    n: int = topic.num_partitions
    return ctx.services.config["num.partitions"] if n == -1 else max(n, 0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    results = []
    refused = too_many_partitions(ctx, sum(_requested(ctx, t) for t in request.topics))
    for topic in request.topics:
        code, message, info = (
            (ErrorCode.invalid_partitions, refused, None)
            if refused
            else _create(ctx, topic, request.validate_only)
        )
        if code != ErrorCode.none:
            log.info("create topic refused", topic=topic.name, error=code.name, reason=message)
        elif info is not None:
            log.info(
                "topic created",
                topic=info.name,
                partitions=info.partitions,
                topic_id=str(info.topic_id),
            )
        results.append(
            build(
                r.CreatableTopicResult,
                name=topic.name,
                topic_id=info.topic_id if info else None,
                error_code=code,
                error_message=message,
                num_partitions=info.partitions if info else -1,
                replication_factor=1 if info else -1,
                configs=None,
            )
        )
    return build(r.type, topics=tuple(results))


HANDLER = Handler(api_key=19, min_version=2, max_version=7, handle=handle, name="CreateTopics")
