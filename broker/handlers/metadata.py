"""Metadata (3): this broker, and topics by name or by id (share consumers look up by id)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.handlers.common import topic_or_create
from broker.registry import Handler
from protocol.messages import build
from storage.topics import TopicInfo


def _topic(r: Response, ctx: RequestContext, topic: TopicInfo) -> Any:
    node = ctx.services.node_id
    partitions = tuple(
        build(
            r.MetadataResponsePartition,
            error_code=ErrorCode.none,
            partition_index=i,
            leader_id=node,
            leader_epoch=0,
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for i in range(topic.partitions)
    )
    return build(
        r.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        partitions=partitions,
        topic_authorized_operations=-2147483648,
    )


def _missing(r: Response, code: ErrorCode, name: str | None, topic_id: Any) -> Any:
    return build(
        r.MetadataResponseTopic, error_code=code, name=name, topic_id=topic_id, partitions=()
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    logs = ctx.services.logs
    allow_create = getattr(request, "allow_auto_topic_creation", True)
    topics: list[Any] = []
    if request.topics is None:
        topics = [_topic(r, ctx, t) for t in logs.topics()]
    for wanted in request.topics or ():
        name = getattr(wanted, "name", None)
        topic_id = getattr(wanted, "topic_id", None)
        if name is None and topic_id is not None and topic_id.int != 0:
            found = logs.topic_by_id(topic_id)
            topics.append(
                _topic(r, ctx, found)
                if found
                else _missing(r, ErrorCode.unknown_topic_id, None, topic_id)
            )
            continue
        topic, code = topic_or_create(ctx, name or "", allow_create)
        topics.append(_topic(r, ctx, topic) if topic else _missing(r, code, name, topic_id))
    services = ctx.services
    broker = build(
        r.MetadataResponseBroker, node_id=services.node_id, host=services.host, port=services.port
    )
    return build(
        r.type,
        brokers=(broker,),
        cluster_id=services.cluster_id,
        controller_id=services.node_id,
        topics=tuple(topics),
        cluster_authorized_operations=-2147483648,
    )


HANDLER = Handler(api_key=3, min_version=1, max_version=12, handle=handle, name="Metadata")
