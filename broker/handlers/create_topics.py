"""CreateTopics (19)."""

from __future__ import annotations

import structlog
from kio.schema.create_topics import v2
from kio.schema.create_topics import v3
from kio.schema.create_topics import v4
from kio.schema.create_topics import v5
from kio.schema.create_topics import v6
from kio.schema.create_topics import v7
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16
from kio.static.primitive import i32

from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import too_many_partitions
from broker.registry import handler
from storage.errors import StorageError
from storage.topics import TopicInfo

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.topics")

Request = (
    v2.CreateTopicsRequest
    | v3.CreateTopicsRequest
    | v4.CreateTopicsRequest
    | v5.CreateTopicsRequest
    | v6.CreateTopicsRequest
    | v7.CreateTopicsRequest
)
Topic = (
    v2.request.CreatableTopic
    | v3.request.CreatableTopic
    | v4.request.CreatableTopic
    | v5.request.CreatableTopic
    | v6.request.CreatableTopic
    | v7.request.CreatableTopic
)


def _create(
    ctx: RequestContext, topic: Topic, validate_only: bool
) -> tuple[ErrorCode, str | None, TopicInfo | None]:
    n = topic.num_partitions
    partitions = ctx.services.config.num_partitions if n == -1 else n
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


def _requested(ctx: RequestContext, n: int) -> int:
    """Partitions a topic of the request asks for (invalid counts add none)."""
    default = ctx.services.config.num_partitions
    return default if n == -1 else max(n, 0)


def _result(
    topic: Topic, code: ErrorCode, message: str | None, info: TopicInfo | None
) -> v7.response.CreatableTopicResult:
    if code != ErrorCode.none:
        log.info("create topic refused", topic=topic.name, error=code.name, reason=message)
    elif info is not None:
        log.info(
            "topic created",
            topic=info.name,
            partitions=info.partitions,
            topic_id=str(info.topic_id),
        )
    return v7.response.CreatableTopicResult(
        name=topic.name,
        topic_id=info.topic_id if info else None,
        error_code=code,
        error_message=message,
        num_partitions=i32(info.partitions if info else -1),
        replication_factor=i16(1 if info else -1),
        configs=None,
    )


async def handle(ctx: RequestContext, request: Request) -> v7.CreateTopicsResponse:
    refused = too_many_partitions(
        ctx, sum(_requested(ctx, t.num_partitions) for t in request.topics)
    )
    results = []
    for topic in request.topics:
        code, message, info = (
            (ErrorCode.invalid_partitions, refused, None)
            if refused
            else _create(ctx, topic, request.validate_only)
        )
        results.append(_result(topic, code, message, info))
    return v7.CreateTopicsResponse(throttle_time=NO_THROTTLE, topics=tuple(results))


HANDLER = handler(
    handle,
    v2.CreateTopicsRequest,
    v3.CreateTopicsRequest,
    v4.CreateTopicsRequest,
    v5.CreateTopicsRequest,
    v6.CreateTopicsRequest,
    v7.CreateTopicsRequest,
)
