"""DescribeCluster (60): one broker, which is also the controller."""

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
    broker = build(
        r.DescribeClusterBroker, broker_id=s.node_id, host=s.host, port=s.port, is_fenced=False
    )
    return build(
        r.type,
        error_code=ErrorCode.none,
        cluster_id=s.cluster_id,
        controller_id=s.node_id,
        brokers=(broker,),
        cluster_authorized_operations=-2147483648,
    )


HANDLER = Handler(api_key=60, min_version=0, max_version=1, handle=handle, name="DescribeCluster")
