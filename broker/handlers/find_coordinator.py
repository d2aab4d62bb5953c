"""FindCoordinator (10): this broker coordinates every group (and transaction id)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from protocol.messages import build


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    s = ctx.services
    where = {"node_id": s.node_id, "host": s.host, "port": s.port, "error_code": ErrorCode.none}
    if hasattr(request, "coordinator_keys"):  # v4+: several keys in one request
        coordinators = tuple(
            build(r.Coordinator, key=key, error_message=None, **where)
            for key in request.coordinator_keys
        )
        return build(r.type, coordinators=coordinators)
    return build(r.type, error_message=None, **where)


HANDLER = Handler(api_key=10, min_version=0, max_version=6, handle=handle, name="FindCoordinator")
