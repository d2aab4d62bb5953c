"""Fetch (1): stored batch bytes, unchanged, with a long poll on MaxWaitMs / MinBytes.

Topics are named up to v12 and identified by topic id from v13. No fetch sessions: the
response carries session id 0, which tells clients to send full requests (KIP-227).
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import handler
from protocol.api_keys import FETCH
from protocol.messages import build
from protocol.messages import request_type
from protocol.messages import response_type
from storage.errors import StorageError


def _resolve(ctx: RequestContext, topic: Any) -> str | None:
    name = getattr(topic, "topic", None)
    if name is not None:
        return str(name)
    info = ctx.services.logs.topic_by_id(topic.topic_id)
    return info.name if info else None


def _read(
    ctx: RequestContext, request: Any, r: Response
) -> tuple[list[Any], int, list[tuple[str, int]]]:
    """One pass over the requested partitions: responses, bytes found, keys to wait on."""
    remaining = request.max_bytes
    topics: list[Any] = []
    keys: list[tuple[str, int]] = []
    total = 0
    for topic in request.topics:
        name = _resolve(ctx, topic)
        unknown = (
            ErrorCode.unknown_topic_or_partition
            if hasattr(topic, "topic")
            else ErrorCode.unknown_topic_id
        )
        partitions = []
        for p in topic.partitions:
            plog = ctx.services.logs.log(name, p.partition) if name is not None else None
            code, records, hw, start = unknown, b"", -1, -1
            if plog is not None:
                hw, start = plog.log_end_offset, plog.log_start_offset
                try:
                    records = (
                        plog.read(p.fetch_offset, max(0, min(p.partition_max_bytes, remaining)))
                        if remaining > 0
                        else b""
                    )
                    code = ErrorCode.none
                except StorageError as e:
                    code = e.error_code
                keys.append((name, p.partition))  # type: ignore[arg-type]
            remaining -= len(records)
            total += len(records)
            partitions.append(
                build(
                    r.PartitionData,
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=hw,
                    last_stable_offset=hw,
                    log_start_offset=start,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=records,
                )
            )
        topics.append(
            build(
                r.FetchableTopicResponse,
                topic=getattr(topic, "topic", None),
                topic_id=getattr(topic, "topic_id", None),
                partitions=tuple(partitions),
            )
        )
    return topics, total, keys


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    deadline = time.monotonic() + request.max_wait.total_seconds()
    while True:
        topics, total, keys = _read(ctx, request, r)
        left = deadline - time.monotonic()
        if total >= request.min_bytes or left <= 0 or not keys:
            break
        await ctx.services.notifier.wait(keys, left)
    return build(r.type, error_code=ErrorCode.none, session_id=0, responses=tuple(topics))


# Until this handler builds typed responses it answers each version with that version's class.
HANDLER = handler(
    handle,
    *(request_type(FETCH, v) for v in range(4, 17)),
    responses=tuple(response_type(FETCH, v) for v in range(4, 17)),
)
