"""What the classic consumer-group handlers share: time conversion."""

from __future__ import annotations

import datetime


def millis(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))
