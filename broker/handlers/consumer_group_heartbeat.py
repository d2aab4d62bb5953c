"""ConsumerGroupHeartbeat (68): KIP-848 consumer groups: join (0), stay, leave (-1, static -2).

v0 lets the coordinator name a joining member; v1 (librdkafka 2.16, Java 4.x) has the client
name it and adds SubscribedTopicRegex. Both are answered with the v1 response (the same fields).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from kio.schema.consumer_group_heartbeat import v0
from kio.schema.consumer_group_heartbeat import v1
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import NOT_COORDINATOR_MESSAGE
from broker.handlers.common import not_coordinator
from broker.handlers.common import too_many_subscribed
from broker.registry import handler
from coordinator.assignor import Assignment
from coordinator.consumer_group import ConsumerHeartbeat
from coordinator.consumer_group import TopicPartition
from coordinator.share_group import CoordinatorError
from protocol.acl import AclOperation
from protocol.acl import ResourceType

Request = v0.ConsumerGroupHeartbeatRequest | v1.ConsumerGroupHeartbeatRequest
Response = v1.ConsumerGroupHeartbeatResponse
DESCRIBE = AclOperation.DESCRIBE


def _assignment(assignment: Assignment | None) -> v1.response.Assignment | None:
    if assignment is None:
        return None  # unchanged since the last one sent
    return v1.response.Assignment(
        topic_partitions=tuple(
            v1.response.TopicPartitions(
                topic_id=topic_id, partitions=tuple(i32(p) for p in partitions)
            )
            for topic_id, partitions in sorted(assignment.items())
        )
    )


def _error(request: Request, code: ErrorCode, message: str) -> Response:
    return Response(
        throttle_time=NO_THROTTLE,
        error_code=code,
        error_message=message,
        member_id=request.member_id or None,
        member_epoch=i32(-1),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(0)),
    )


def _undescribable(ctx: RequestContext, topics: Sequence[str] | None) -> list[str]:
    """Subscribed topics the principal may not DESCRIBE: Kafka refuses the heartbeat."""
    return [t for t in topics or () if not authorize(ctx, DESCRIBE, ResourceType.TOPIC, t)]


def _subscribed_count(request: Request) -> int:
    """The larger of the topic names subscribed and the partitions owned (counted only when
    the topics listed are few enough to walk)."""
    topics = request.topic_partitions or ()
    count = max(len(request.subscribed_topic_names or ()), len(topics))
    if count > 100_000:
        return count
    return max(count, sum(len(t.partitions) for t in topics))


def _owned(request: Request) -> frozenset[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    return frozenset(
        (tp.topic_id, int(p))
        for tp in request.topic_partitions
        if tp.topic_id is not None
        for p in tp.partitions
    )


def _heartbeat(ctx: RequestContext, request: Request) -> ConsumerHeartbeat:
    timeout = request.rebalance_timeout.total_seconds() * 1000
    return ConsumerHeartbeat(
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(timeout),
        subscribed=request.subscribed_topic_names,
        regex=None
        if isinstance(request, v0.ConsumerGroupHeartbeatRequest)
        else request.subscribed_topic_regex or None,
        server_assignor=request.server_assignor,
        owned=_owned(request),
        client_id=ctx.header.client_id or "",
        client_host=ctx.host,  # the address alone, as JoinGroup records it
    )


async def handle(ctx: RequestContext, request: Request) -> Response:
    s = ctx.services
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(request, ErrorCode.group_authorization_failed, "no READ on the group")
    if not_coordinator(ctx, request.group_id):
        return _error(request, ErrorCode.not_coordinator, NOT_COORDINATOR_MESSAGE)
    if too_many := too_many_subscribed(ctx, _subscribed_count(request)):
        return _error(request, ErrorCode.invalid_request, too_many)
    denied = _undescribable(ctx, request.subscribed_topic_names)
    if denied:
        return _error(request, ErrorCode.topic_authorization_failed, f"no DESCRIBE on {denied}")
    try:
        result = s.consumer_groups.heartbeat(
            request.group_id, request.member_id, _heartbeat(ctx, request), s.now_ms()
        )
    except CoordinatorError as e:
        return _error(request, e.error_code, str(e))
    return Response(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        member_id=result.member_id,
        member_epoch=i32(result.member_epoch),
        heartbeat_interval=i32Timedelta.parse(
            datetime.timedelta(milliseconds=result.heartbeat_interval_ms)
        ),
        assignment=_assignment(result.assignment),
    )


HANDLER = handler(
    handle,
    v0.ConsumerGroupHeartbeatRequest,
    v1.ConsumerGroupHeartbeatRequest,
    acl=((AclOperation.READ, ResourceType.GROUP), (DESCRIBE, ResourceType.TOPIC)),
)
