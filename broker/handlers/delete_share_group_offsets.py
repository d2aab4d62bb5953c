"""DeleteShareGroupOffsets (92): forget the share-partitions of topics, for an EMPTY group.

The next member starts them again from `share.auto.offset.reset`. A topic the group has no
share-partition of answers UNKNOWN_TOPIC_OR_PARTITION, as does an unknown topic.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_group_offsets import group_admin
from coordinator.share_group import CoordinatorError
from protocol.messages import build
from storage.errors import StorageError


def _delete(ctx: RequestContext, group_id: str, name: str) -> tuple[Any, ErrorCode, str | None]:
    topic = ctx.services.logs.topic(name)
    if topic is None:
        return None, ErrorCode.unknown_topic_or_partition, f"no topic {name!r}"
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    started = [p for p in range(topic.partitions) if offsets.initialised(group_id, topic, p)]
    if not started:
        return topic, ErrorCode.unknown_topic_or_partition, f"{group_id} has no offsets on {name}"
    try:
        for p in started:
            offsets.delete(group_id, topic, p)
    except StorageError as e:
        return topic, e.error_code, str(e)
    return topic, ErrorCode.none, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    try:
        group_admin(ctx.services.coordinator, ctx.services.share_partitions).require_empty(
            request.group_id
        )
    except CoordinatorError as e:
        return build(r.type, error_code=e.error_code, error_message=str(e), responses=())
    responses = []
    for t in request.topics:
        topic, code, message = _delete(ctx, request.group_id, t.topic_name)
        responses.append(
            build(
                r.DeleteShareGroupOffsetsResponseTopic,
                topic_name=t.topic_name,
                topic_id=topic.topic_id if topic else None,
                error_code=code,
                error_message=message,
            )
        )
    return build(r.type, error_code=ErrorCode.none, error_message=None, responses=tuple(responses))


HANDLER = Handler(
    api_key=92, min_version=0, max_version=0, handle=handle, name="DeleteShareGroupOffsets"
)
