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

from broker.authorization import authorize
from broker.authorization import authorize_cluster
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_CONTROLLER_MESSAGE
from broker.handlers.common import not_controller
from broker.handlers.common import too_many_partitions
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.config import check_topic_config_names
from storage.config import check_topic_config_values
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


def _partitions(ctx: RequestContext, topic: Topic) -> int | tuple[ErrorCode, str]:
    """How many partitions the topic gets: a manual assignment's count, the count asked
    for, or the broker's num.partitions for -1; or why the request is refused."""
    if not topic.assignments:
        n = topic.num_partitions
        return ctx.services.config.num_partitions if n == -1 else n
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        problem = "with a manual assignment, NumPartitions and ReplicationFactor must be -1"
        return ErrorCode.invalid_request, problem
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        return ErrorCode.invalid_replica_assignment, "partitions must be numbered 0 to N-1"
    node = ctx.services.node_id
    if any(list(a.broker_ids) != [node] for a in topic.assignments):
        return ErrorCode.invalid_replica_assignment, f"this broker ({node}) is the one replica"
    return len(indexes)


async def _create(
    ctx: RequestContext, topic: Topic, validate_only: bool
) -> tuple[ErrorCode, str | None, TopicInfo | None]:
    if not (
        authorize_cluster(ctx, AclOperation.CREATE)
        or authorize(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name)
    ):
        return ErrorCode.topic_authorization_failed, None, None
    if not_controller(ctx):
        return ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE, None
    partitions = _partitions(ctx, topic)
    if isinstance(partitions, tuple):
        return *partitions, None
    if topic.replication_factor not in (-1, 1):
        return ErrorCode.invalid_replication_factor, "a single broker keeps one replica", None
    if partitions <= 0:
        return ErrorCode.invalid_partitions, f"{partitions} partitions", None
    if ctx.services.logs.topic(topic.name) is not None:
        return ErrorCode.topic_already_exists, f"topic {topic.name!r} already exists", None
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        if validate_only:
            check_topic_config_names(configs)
            check_topic_config_values(configs)
            ctx.services.logs.config.with_overrides(configs)
            return ErrorCode.none, None, None
        s = ctx.services
        return (
            ErrorCode.none,
            None,
            await s.topic_admin.create_topic(s.logs, topic.name, partitions, configs, _logged),
        )
    except StorageError as e:
        return e.error_code, str(e), None


def _requested(ctx: RequestContext, topic: Topic) -> int:
    """Partitions a topic of the request asks for (invalid counts add none)."""
    partitions = _partitions(ctx, topic)
    return max(partitions, 0) if isinstance(partitions, int) else 0


def _logged(info: TopicInfo) -> None:
    """Said by the creation itself (`TopicAdmin`): the client may have gone meanwhile."""
    log.info(
        "topic created", topic=info.name, partitions=info.partitions, topic_id=str(info.topic_id)
    )


def _result(
    topic: Topic, code: ErrorCode, message: str | None, info: TopicInfo | None
) -> v7.response.CreatableTopicResult:
    if code != ErrorCode.none:
        log.info("create topic refused", topic=topic.name, error=code.name, reason=message)
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
    slicer = Slicer()  # a request may name a million topics
    requested = 0
    for t in request.topics:
        requested += _requested(ctx, t)
        await slicer.pause()
    refused = too_many_partitions(ctx, requested)
    results = []
    for topic in request.topics:
        code, message, info = (
            (ErrorCode.invalid_partitions, refused, None)
            if refused
            else await _create(ctx, topic, request.validate_only)
        )
        results.append(_result(topic, code, message, info))
        await slicer.pause()
    return v7.CreateTopicsResponse(throttle_time=NO_THROTTLE, topics=tuple(results))


HANDLER = handler(
    handle,
    v2.CreateTopicsRequest,
    v3.CreateTopicsRequest,
    v4.CreateTopicsRequest,
    v5.CreateTopicsRequest,
    v6.CreateTopicsRequest,
    v7.CreateTopicsRequest,
    acl=((AclOperation.CREATE, ResourceType.CLUSTER), (AclOperation.CREATE, ResourceType.TOPIC)),
)
