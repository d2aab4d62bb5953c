"""Metadata (3): this broker, and topics by name or by id (share consumers look up by id).

v8-10 carry ClusterAuthorizedOperations, which v11 removed, so v1-10 are answered with v10's
classes and v11-12 with v12's (where a topic's name may be null: an unknown topic id).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.metadata import v1
from kio.schema.metadata import v2
from kio.schema.metadata import v3
from kio.schema.metadata import v4
from kio.schema.metadata import v5
from kio.schema.metadata import v6
from kio.schema.metadata import v7
from kio.schema.metadata import v8
from kio.schema.metadata import v9
from kio.schema.metadata import v10
from kio.schema.metadata import v11
from kio.schema.metadata import v12
from kio.schema.types import BrokerId
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.authorization import authorize
from broker.authorization import authorize_cluster
from broker.authorization import authorized_operations
from broker.authorized_operations import CLUSTER_OPERATIONS
from broker.authorized_operations import NOT_REQUESTED
from broker.authorized_operations import TOPIC_OPERATIONS
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import topic_or_create
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import CLUSTER_NAME
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.topics import TopicInfo

DESCRIBE, CREATE = AclOperation.DESCRIBE, AclOperation.CREATE
TOPIC = ResourceType.TOPIC

Request = (
    v1.MetadataRequest
    | v2.MetadataRequest
    | v3.MetadataRequest
    | v4.MetadataRequest
    | v5.MetadataRequest
    | v6.MetadataRequest
    | v7.MetadataRequest
    | v8.MetadataRequest
    | v9.MetadataRequest
    | v10.MetadataRequest
    | v11.MetadataRequest
    | v12.MetadataRequest
)
OLDER_THAN_V8 = (
    v1.MetadataRequest, v2.MetadataRequest, v3.MetadataRequest, v4.MetadataRequest,
    v5.MetadataRequest, v6.MetadataRequest, v7.MetadataRequest,
)  # fmt: skip
ById = (
    v10.request.MetadataRequestTopic
    | v11.request.MetadataRequestTopic
    | v12.request.MetadataRequestTopic
)


@dataclass(frozen=True, slots=True)
class _Topic:
    """One topic of the answer, whatever the version."""

    code: ErrorCode
    name: str | None
    topic_id: uuid.UUID | None
    partitions: int = 0

    @classmethod
    def of(cls, topic: TopicInfo) -> _Topic:
        return cls(ErrorCode.none, topic.name, topic.topic_id, topic.partitions)


async def _topics(ctx: RequestContext, request: Request, slicer: Slicer) -> list[_Topic]:
    logs = ctx.services.logs
    allow_create = (
        True
        if isinstance(request, (v1.MetadataRequest, v2.MetadataRequest, v3.MetadataRequest))
        else request.allow_auto_topic_creation
    )
    if request.topics is None:  # all topics: those it may not describe are left out
        described = await slicer.map(
            lambda t: _Topic.of(t) if authorize(ctx, DESCRIBE, TOPIC, t.name) else None,
            logs.topics(),
        )
        return [t for t in described if t is not None]
    out = []
    for wanted in request.topics:
        name = wanted.name
        topic_id = wanted.topic_id if isinstance(wanted, ById) else None
        if name is None and topic_id is not None and topic_id.int != 0:
            out.append(_by_id(ctx, topic_id))
        else:
            out.append(await _by_name(ctx, name or "", topic_id, allow_create))
        await slicer.pause()
    return out


def _by_id(ctx: RequestContext, topic_id: uuid.UUID) -> _Topic:
    found = ctx.services.logs.topic_by_id(topic_id)
    if found is None:
        return _Topic(ErrorCode.unknown_topic_id, None, topic_id)
    if not authorize(ctx, DESCRIBE, TOPIC, found.name):  # the name stays hidden, as in Kafka
        return _Topic(ErrorCode.topic_authorization_failed, None, topic_id)
    return _Topic.of(found)


async def _by_name(
    ctx: RequestContext, name: str, topic_id: uuid.UUID | None, allow_create: bool
) -> _Topic:
    if not authorize(ctx, DESCRIBE, TOPIC, name):
        return _Topic(ErrorCode.topic_authorization_failed, name, topic_id)
    # Auto-creation needs CREATE on the cluster or the topic, as CreateTopics does.
    may_create = allow_create and (
        authorize_cluster(ctx, CREATE) or authorize(ctx, CREATE, TOPIC, name)
    )
    topic, code = await topic_or_create(ctx, name, may_create)
    if topic is not None:
        return _Topic.of(topic)
    if allow_create and not may_create and ctx.services.config.auto_create_topics_enable:
        code = ErrorCode.topic_authorization_failed
    return _Topic(code, name, topic_id)


Partition = TypeVar(
    "Partition", v10.response.MetadataResponsePartition, v12.response.MetadataResponsePartition
)


@functools.lru_cache(maxsize=256)
def _partitions(cls: type[Partition], node: BrokerId, count: int) -> tuple[Partition, ...]:
    """Every partition led by this broker, the only replica: the same entries for every topic
    of `count` partitions (immutable, so shared between answers: a topic of 10,000 partitions
    is not rebuilt per request)."""
    return tuple(
        cls(
            error_code=ErrorCode.none,
            partition_index=i32(i),
            leader_id=node,
            leader_epoch=i32(0),
            replica_nodes=(node,),
            isr_nodes=(node,),
        )
        for i in range(count)
    )


TopicOps = Callable[[_Topic], i32]


async def _answer_v12(
    ctx: RequestContext, topics: list[_Topic], topic_ops: TopicOps, slicer: Slicer
) -> v12.MetadataResponse:
    s, r = ctx.services, v12.response
    node = BrokerId(s.node_id)
    host, port = ctx.endpoint  # of the listener the client connected to
    answered = await slicer.map(
        lambda t: r.MetadataResponseTopic(
            error_code=t.code,
            name=None if t.name is None else TopicName(t.name),
            topic_id=t.topic_id,
            partitions=_partitions(r.MetadataResponsePartition, node, t.partitions),
            topic_authorized_operations=topic_ops(t),
        ),
        topics,
    )
    return v12.MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(r.MetadataResponseBroker(node_id=node, host=host, port=i32(port)),),
        cluster_id=s.cluster_id,
        controller_id=node,
        topics=tuple(answered),
    )


async def _answer_v10(
    ctx: RequestContext, topics: list[_Topic], topic_ops: TopicOps, cluster_ops: i32,
    slicer: Slicer,
) -> v10.MetadataResponse:  # fmt: skip
    s, r = ctx.services, v10.response
    node = BrokerId(s.node_id)
    host, port = ctx.endpoint  # of the listener the client connected to
    answered = await slicer.map(
        lambda t: r.MetadataResponseTopic(
            error_code=t.code,
            name=TopicName(t.name or ""),  # not nullable before v12
            topic_id=t.topic_id,
            partitions=_partitions(r.MetadataResponsePartition, node, t.partitions),
            topic_authorized_operations=topic_ops(t),
        ),
        topics,
    )
    return v10.MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(r.MetadataResponseBroker(node_id=node, host=host, port=i32(port)),),
        cluster_id=s.cluster_id,
        controller_id=node,
        topics=tuple(answered),
        cluster_authorized_operations=cluster_ops,
    )


async def handle(
    ctx: RequestContext, request: Request
) -> v10.MetadataResponse | v12.MetadataResponse:
    slicer = Slicer()  # a request may name 300,000 topics
    topics = await _topics(ctx, request, slicer)
    cluster_ops = NOT_REQUESTED
    if (
        isinstance(request, (v8.MetadataRequest, v9.MetadataRequest, v10.MetadataRequest))
        and request.include_cluster_authorized_operations
    ):
        cluster_ops = authorized_operations(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS
        )
    with_ops = (
        not isinstance(request, OLDER_THAN_V8) and request.include_topic_authorized_operations
    )

    def topic_ops(t: _Topic) -> i32:
        if not with_ops or t.name is None or t.code != ErrorCode.none:
            return NOT_REQUESTED
        return authorized_operations(ctx, TOPIC, t.name, TOPIC_OPERATIONS)

    if isinstance(request, (v11.MetadataRequest, v12.MetadataRequest)):
        return await _answer_v12(ctx, topics, topic_ops, slicer)
    return await _answer_v10(ctx, topics, topic_ops, cluster_ops, slicer)


HANDLER = handler(
    handle,
    v1.MetadataRequest,
    v2.MetadataRequest,
    v3.MetadataRequest,
    v4.MetadataRequest,
    v5.MetadataRequest,
    v6.MetadataRequest,
    v7.MetadataRequest,
    v8.MetadataRequest,
    v9.MetadataRequest,
    v10.MetadataRequest,
    v11.MetadataRequest,
    v12.MetadataRequest,
    responses=(v10.MetadataResponse, v12.MetadataResponse),
    acl=((DESCRIBE, TOPIC), (CREATE, ResourceType.CLUSTER), (CREATE, TOPIC)),
)
