"""OffsetDelete (47): drop some of a consumer group's committed offsets (tombstones).

As Kafka: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), a group with no committed
offsets is GROUP_ID_NOT_FOUND; per partition READ on the topic, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, and a topic a live member subscribes to (the group coordinators'
`GroupMembership.is_subscribed`) GROUP_SUBSCRIBED_TO_TOPIC. The rest is deleted in one append.
"""

from __future__ import annotations

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.offset_delete import v0
from kio.schema.types import TopicName

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.handlers.common import not_coordinator
from broker.registry import handler
from broker.slicing import Slicer
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from storage.errors import StorageError

Codes = dict[tuple[str, int], ErrorCode]


log = structlog.get_logger("shoal.groups")


def _topic_code(ctx: RequestContext, group_id: str, topic: str) -> ErrorCode:
    if not authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic):
        return ErrorCode.topic_authorization_failed
    if ctx.services.logs.topic(topic) is None:
        return ErrorCode.unknown_topic_or_partition
    if ctx.services.offsets.is_subscribed(group_id, topic):
        return ErrorCode.group_subscribed_to_topic
    return ErrorCode.none


async def _delete(ctx: RequestContext, request: v0.OffsetDeleteRequest, slicer: Slicer) -> Codes:
    codes: Codes = {}
    committed = ctx.services.offsets.group_offsets(request.group_id)
    doomed = []  # committed partitions to delete (a request may name a million others)
    for topic in request.topics:
        code = _topic_code(ctx, request.group_id, topic.name)
        for p in topic.partitions:
            tp = (str(topic.name), int(p.partition_index))
            codes[tp] = code
            if code is ErrorCode.none and tp in committed:
                doomed.append(tp)
            await slicer.pause()
    try:
        ctx.services.offsets.delete_offsets(request.group_id, doomed)
    except StorageError as e:
        codes.update(dict.fromkeys(doomed, e.error_code))
        return codes
    if doomed:
        log.info("committed offsets deleted", group=request.group_id,
                 partitions=[f"{t}-{p}" for t, p in doomed])  # fmt: skip
    return codes


def _group_code(ctx: RequestContext, group_id: str) -> ErrorCode:
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed
    if not_coordinator(ctx, group_id):
        return ErrorCode.not_coordinator
    if not ctx.services.offsets.has_group(group_id):
        return ErrorCode.group_id_not_found
    return ErrorCode.none


async def handle(ctx: RequestContext, request: v0.OffsetDeleteRequest) -> v0.OffsetDeleteResponse:
    group_code = _group_code(ctx, request.group_id)
    if group_code is not ErrorCode.none:
        return v0.OffsetDeleteResponse(error_code=group_code, throttle_time=NO_THROTTLE, topics=())
    slicer = Slicer()
    codes = await _delete(ctx, request, slicer)
    r = v0.response
    answered = []
    for t in request.topics:
        name, partitions = str(t.name), []
        for p in t.partitions:
            partitions.append(
                r.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index,
                    error_code=codes[(name, int(p.partition_index))],
                )
            )
            await slicer.pause()
        answered.append(
            r.OffsetDeleteResponseTopic(name=TopicName(t.name), partitions=tuple(partitions))
        )
    topics = tuple(answered)
    return v0.OffsetDeleteResponse(
        error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=topics
    )


HANDLER = handler(
    handle,
    v0.OffsetDeleteRequest,
    acl=((AclOperation.DELETE, ResourceType.GROUP), (AclOperation.READ, ResourceType.TOPIC)),
)
