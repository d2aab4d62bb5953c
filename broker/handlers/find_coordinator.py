"""FindCoordinator (10): this broker coordinates every group (and transaction id)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids
from protocol.messages import build

GROUP_KEY_TYPE = 0


def _where(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    s = ctx.services
    if key_type == GROUP_KEY_TYPE:
        try:
            check_ids(key)
        except CoordinatorError as e:
            return {"node_id": -1, "host": "", "port": -1, "error_code": e.error_code,
                    "error_message": str(e)}  # fmt: skip
    return {"node_id": s.node_id, "host": s.host, "port": s.port,
            "error_code": ErrorCode.none, "error_message": None}  # fmt: skip


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if hasattr(request, "coordinator_keys"):  # v4+: several keys in one request
        coordinators = tuple(
            build(r.Coordinator, key=key, **_where(ctx, key_type, key))
            for key in request.coordinator_keys
        )
        return build(r.type, coordinators=coordinators)
    return build(r.type, **_where(ctx, key_type, request.key))


HANDLER = Handler(api_key=10, min_version=0, max_version=6, handle=handle, name="FindCoordinator")
