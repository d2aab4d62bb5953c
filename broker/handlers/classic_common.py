"""What the classic consumer-group handlers share: time conversion and the group-kind check."""

from __future__ import annotations

import datetime

from broker.context import RequestContext
from broker.share.share_group_offsets import group_admin


def millis(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


def is_share_group(ctx: RequestContext, group_id: str) -> bool:
    """A group id is one kind at a time: a share group's id is no consumer group's."""
    s = ctx.services
    return group_admin(s.coordinator, s.share_partitions).group(group_id) is not None
