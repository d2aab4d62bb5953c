"""InitProducerId (22): a fresh producer id for idempotent producers.

Transactions are not supported: a transactional id is refused. A producer that re-initialises
with its current id and epoch (v3+) gets the next epoch, so its old batches are fenced.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from protocol.messages import build

MAX_EPOCH = 32767


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    if request.transactional_id is not None:
        return build(
            r.type,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return build(r.type, error_code=ErrorCode.none, producer_id=pid, producer_epoch=epoch + 1)
    return build(
        r.type,
        error_code=ErrorCode.none,
        producer_id=ctx.services.producer_ids.allocate(),
        producer_epoch=0,
    )


HANDLER = Handler(api_key=22, min_version=0, max_version=5, handle=handle, name="InitProducerId")
