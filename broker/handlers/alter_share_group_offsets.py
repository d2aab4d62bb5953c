"""AlterShareGroupOffsets (91): set the SPSO of share-partitions of an EMPTY share group.

Every in-flight state and delivery count of a reset share-partition is dropped, and the new
start is written as a SHARE_CHECKPOINT before the answer, so it survives a restart. A group
with members gets NON_EMPTY_GROUP for the whole request; an unknown group is created empty
(this is how a share group is initialised before it first runs, KIP-932).
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


def _topic(ctx: RequestContext, r: Response, group_id: str, t: Any) -> Any:
    topic = ctx.services.logs.topic(t.topic_name)
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    rows = []
    for p in t.partitions:
        message: str | None
        if topic is None or not 0 <= p.partition_index < topic.partitions:
            code, message = (
                ErrorCode.unknown_topic_or_partition,
                f"no {t.topic_name}-{p.partition_index}",
            )
        else:
            code = offsets.reset(group_id, topic, p.partition_index, p.start_offset)
            message = (
                "start offset must not be negative" if code == ErrorCode.invalid_request else None
            )
        rows.append(
            build(
                r.AlterShareGroupOffsetsResponsePartition,
                partition_index=p.partition_index,
                error_code=code,
                error_message=message,
            )
        )
    return build(
        r.AlterShareGroupOffsetsResponseTopic,
        topic_name=t.topic_name,
        topic_id=topic.topic_id if topic else None,
        partitions=tuple(rows),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    try:
        s = ctx.services
        group_admin(s.coordinator, s.share_partitions).require_empty(request.group_id, create=True)
    except CoordinatorError as e:
        return build(r.type, error_code=e.error_code, error_message=str(e), responses=())
    topics = tuple(_topic(ctx, r, request.group_id, t) for t in request.topics)
    return build(r.type, error_code=ErrorCode.none, error_message=None, responses=topics)


HANDLER = Handler(
    api_key=91, min_version=0, max_version=0, handle=handle, name="AlterShareGroupOffsets"
)
