"""DeleteTopics (20): by name, or by topic id from v6."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from protocol.messages import build


def _targets(request: Any) -> list[tuple[str | None, Any]]:
    if hasattr(request, "topic_names"):
        return [(name, None) for name in request.topic_names]
    return [(t.name, t.topic_id) for t in request.topics]


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    logs = ctx.services.logs
    results = []
    for name, topic_id in _targets(request):
        info = logs.topic(name) if name else logs.topic_by_id(topic_id)
        code = ErrorCode.none
        if info is None:
            code = ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id
        else:
            logs.delete_topic(info.name)
            ctx.services.share_partitions.forget_topic(info.name, info.topic_id)
        results.append(
            build(
                r.DeletableTopicResult,
                name=info.name if info else name,
                topic_id=info.topic_id if info else topic_id,
                error_code=code,
            )
        )
    return build(r.type, responses=tuple(results))


HANDLER = Handler(api_key=20, min_version=1, max_version=6, handle=handle, name="DeleteTopics")
