"""OffsetFetch (9): until Shoal has consumer groups, every partition has no committed offset.

A librdkafka `Consumer` with a `group.id` that calls `assign()` without offsets asks for its
committed offsets, and crashed (exit 139) when the broker did not serve OffsetFetch. Answering
-1 ("no committed offset") for every partition lets it start from `auto.offset.reset`, as a
new group does in Kafka. A request for all of a group's topics (null topics) lists none.
v1-7 name one group (v7's classes); v8+ carry a list of groups (v9's classes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch import v1
from kio.schema.offset_fetch import v2
from kio.schema.offset_fetch import v3
from kio.schema.offset_fetch import v4
from kio.schema.offset_fetch import v5
from kio.schema.offset_fetch import v6
from kio.schema.offset_fetch import v7
from kio.schema.offset_fetch import v8
from kio.schema.offset_fetch import v9
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.authorization import authorize
from broker.context import RequestContext
from broker.handlers.common import NO_THROTTLE
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType

OneGroup = (
    v1.OffsetFetchRequest | v2.OffsetFetchRequest | v3.OffsetFetchRequest
    | v4.OffsetFetchRequest | v5.OffsetFetchRequest | v6.OffsetFetchRequest
    | v7.OffsetFetchRequest
)  # fmt: skip
Request = OneGroup | v8.OffsetFetchRequest | v9.OffsetFetchRequest
NO_OFFSET = i64(-1)


class Topic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


def _topic_code(ctx: RequestContext, topic: str) -> ErrorCode:
    if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
        return ErrorCode.none
    return ErrorCode.topic_authorization_failed


def _group_allowed(ctx: RequestContext, group_id: str) -> bool:
    return authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)


def _one_group(
    ctx: RequestContext, topics: Sequence[Topic] | None
) -> tuple[v7.response.OffsetFetchResponseTopic, ...]:
    r = v7.response
    return tuple(
        r.OffsetFetchResponseTopic(
            name=TopicName(t.name),
            partitions=tuple(
                r.OffsetFetchResponsePartition(
                    partition_index=i32(p),
                    committed_offset=NO_OFFSET,
                    metadata=None,
                    error_code=_topic_code(ctx, t.name),
                )
                for p in t.partition_indexes
            ),
        )
        for t in topics or ()
    )


def _groups(
    ctx: RequestContext, request: v8.OffsetFetchRequest | v9.OffsetFetchRequest
) -> v9.OffsetFetchResponse:
    r = v9.response
    groups = []
    for g in request.groups:
        if not _group_allowed(ctx, g.group_id):
            groups.append(
                r.OffsetFetchResponseGroup(
                    group_id=g.group_id, topics=(), error_code=ErrorCode.group_authorization_failed
                )
            )
            continue
        topics: Sequence[Topic] = g.topics or ()
        groups.append(
            r.OffsetFetchResponseGroup(
                group_id=g.group_id,
                topics=tuple(
                    r.OffsetFetchResponseTopics(
                        name=TopicName(t.name),
                        partitions=tuple(
                            r.OffsetFetchResponsePartitions(
                                partition_index=i32(p),
                                committed_offset=NO_OFFSET,
                                metadata=None,
                                error_code=_topic_code(ctx, t.name),
                            )
                            for p in t.partition_indexes
                        ),
                    )
                    for t in topics
                ),
            )
        )
    return v9.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(groups))


async def handle(
    ctx: RequestContext, request: Request
) -> v7.OffsetFetchResponse | v9.OffsetFetchResponse:
    if isinstance(request, (v8.OffsetFetchRequest, v9.OffsetFetchRequest)):
        return _groups(ctx, request)
    if not _group_allowed(ctx, request.group_id):
        return v7.OffsetFetchResponse(
            throttle_time=NO_THROTTLE, topics=(), error_code=ErrorCode.group_authorization_failed
        )
    topics: Sequence[Topic] | None = request.topics
    return v7.OffsetFetchResponse(
        throttle_time=NO_THROTTLE, topics=_one_group(ctx, topics), error_code=ErrorCode.none
    )


HANDLER = handler(
    handle,
    v1.OffsetFetchRequest, v2.OffsetFetchRequest, v3.OffsetFetchRequest,
    v4.OffsetFetchRequest, v5.OffsetFetchRequest, v6.OffsetFetchRequest,
    v7.OffsetFetchRequest, v8.OffsetFetchRequest, v9.OffsetFetchRequest,
    responses=(v7.OffsetFetchResponse, v9.OffsetFetchResponse),
    acl=((AclOperation.DESCRIBE, ResourceType.GROUP), (AclOperation.DESCRIBE, ResourceType.TOPIC)),
)  # fmt: skip
