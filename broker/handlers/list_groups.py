"""ListGroups (16): share groups, with the states (v4+) and types (v5+) filters.

Shoal serves share groups only: a share group lists with type and protocol type "share" and
state Stable (members) or Empty. A types filter without "share" lists nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.handlers.common import Response
from broker.registry import Handler
from broker.share.share_group_offsets import group_admin
from protocol.messages import build


async def handle(ctx: RequestContext, request: Any) -> Any:
    r = Response(ctx)
    s = ctx.services
    listings = group_admin(s.coordinator, s.share_partitions).list_groups(
        states=getattr(request, "states_filter", ()),
        types=getattr(request, "types_filter", ()),
    )
    groups = tuple(
        build(
            r.ListedGroup,
            group_id=g.group_id,
            protocol_type=g.protocol_type,
            group_state=g.state,
            group_type=g.group_type,
        )
        for g in listings
    )
    return build(r.type, error_code=ErrorCode.none, groups=groups)


HANDLER = Handler(api_key=16, min_version=0, max_version=5, handle=handle, name="ListGroups")
