"""A clock tests move forward, for a broker running in the test's own process.

Brokers run as a child process (`tests/brokers.py` BrokerProcess: the compat, Spark and CLI
tests) keep the wall clock. Moving their clock would need a way into `shoal serve` (a flag, an
environment variable, a request) that would ship in the production broker; and those suites are
where lock durations and session timeouts are checked against real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ManualClock:
    """Wall time plus an offset that only `advance` changes.

    Time still passes on its own (records get real timestamps, retention and long polls behave
    as usual); a test jumps it forward instead of sleeping out a lock or session timeout.
    Whatever `on_advance` registered (the broker's timer duties) runs at once after each jump,
    so expiry has happened when `advance` returns.
    """

    def __init__(self) -> None:
        self.offset_ms = 0
        self._listeners: list[Callable[[], None]] = []

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def on_advance(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self.offset_ms += ms
        for listener in self._listeners:
            listener()
