"""DescribeShareGroupOffsets (90): SPSO per share-partition, and (v1, Kafka 4.2) its lag.

With Topics null every initialised share-partition of the group is described; a named
partition the group never started answers StartOffset -1 and Lag -1, as Kafka does. On
success the partition's ErrorMessage carries Shoal's extra detail (SPEO and in-flight counts
by state) as `key=value` words; Kafka's clients ignore an error message without an error.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_group_offsets import group_admin
from protocol.messages import build


def _partition(r: Response, index: int, code: ErrorCode, offsets: Any = None) -> Any:
    return build(
        r.DescribeShareGroupOffsetsResponsePartition,
        partition_index=index,
        start_offset=offsets.start_offset if offsets else -1,
        leader_epoch=0 if offsets else -1,
        lag=offsets.lag if offsets else -1,
        error_code=code,
        error_message=offsets.extension() if offsets and offsets.start_offset >= 0 else None,
    )


def _topics(ctx: RequestContext, r: Response, group_id: str, wanted: Any) -> tuple[Any, ...]:
    s = ctx.services
    offsets = ShareGroupOffsets(s.share_partitions, s.logs, s.now_ms)
    logs = ctx.services.logs
    if wanted is None:
        by_topic: dict[str, list[int]] = {}
        for topic, p in offsets.partitions(group_id):
            by_topic.setdefault(topic.name, []).append(p)
        requested = list(by_topic.items())
    else:
        requested = [(t.topic_name, list(t.partitions)) for t in wanted]
    out = []
    for name, partitions in requested:
        info = logs.topic(name)
        rows = []
        for p in partitions:
            if info is None or not 0 <= p < info.partitions:
                rows.append(_partition(r, p, ErrorCode.unknown_topic_or_partition))
            else:
                rows.append(_partition(r, p, ErrorCode.none, offsets.describe(group_id, info, p)))
        out.append(
            build(
                r.DescribeShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=info.topic_id if info else None,
                partitions=tuple(rows),
            )
        )
    return tuple(out)


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    admin = group_admin(ctx.services.coordinator, ctx.services.share_partitions)
    groups = []
    for g in request.groups:
        if not g.group_id or admin.group(g.group_id) is None:
            code = ErrorCode.invalid_group_id if not g.group_id else ErrorCode.group_id_not_found
            groups.append(
                build(
                    r.DescribeShareGroupOffsetsResponseGroup,
                    group_id=g.group_id,
                    topics=(),
                    error_code=code,
                    error_message=f"no share group {g.group_id!r}",
                )
            )
            continue
        groups.append(
            build(
                r.DescribeShareGroupOffsetsResponseGroup,
                group_id=g.group_id,
                topics=_topics(ctx, r, g.group_id, g.topics),
                error_code=ErrorCode.none,
            )
        )
    return build(r.type, groups=tuple(groups))


HANDLER = Handler(
    api_key=90, min_version=0, max_version=1, handle=handle, name="DescribeShareGroupOffsets"
)
