"""The broker's time source for share logic: lock deadlines, session timeouts, leave grace.

Production uses the wall clock. Tests that run a broker in their own process pass a clock
they can move forward (`tests/clock.py`); nothing a client sends can choose or move the clock.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...


class WallClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
