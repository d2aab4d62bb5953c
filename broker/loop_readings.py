"""Broker state for a scrape, read on the event loop and handed to the metrics thread.

prometheus_client serves /metrics from a thread of its own, and collectors run in it. State
the loop changes in several steps (a share-partition's window and its counters, a log's
segments and non-data ranges, committed offsets) is not read from that thread: a scrape asks
the loop for a fresh reading and waits for it, bounded. The loop computes it in slices,
letting requests run between them (`compute` awaits between slices). Scrapes that arrive
together share one computation. If the loop does not answer in time (stalled, or the caller
is the loop's own thread, as a test calling the registry directly is), the last reading is
served, and a stall is logged once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from collections.abc import Coroutine
from typing import Any
from typing import Generic
from typing import TypeVar

import structlog

log = structlog.get_logger("shoal.metrics")

T = TypeVar("T")
READ_TIMEOUT_S = 5.0  # Prometheus's default scrape timeout is 10 s


class LoopReadings(Generic[T]):
    def __init__(
        self,
        compute: Callable[[], Coroutine[Any, Any, T]],
        empty: T,
        timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        self._compute = compute
        self._latest = empty
        self._timeout_s = timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1
        self._lock = threading.Lock()
        self._pending: concurrent.futures.Future[T] | None = None
        self._stalled = False

    def attach(self) -> None:
        """Serve readings from the running loop (call on it, once it runs)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def detach(self) -> None:
        """The loop is stopping: serve the last reading from now on."""
        self._loop = None

    @property
    def latest(self) -> T:
        return self._latest

    def read(self) -> T:
        """A fresh reading (any thread but the loop's); the last one if the loop cannot give
        one within the timeout."""
        loop = self._loop
        if loop is None or threading.get_ident() == self._loop_thread:
            return self._latest
        with self._lock:
            pending = self._pending
            if pending is None or pending.done():
                try:
                    pending = asyncio.run_coroutine_threadsafe(self._refresh(), loop)
                except RuntimeError:  # the loop closed meanwhile
                    return self._latest
                self._pending = pending
        try:
            return pending.result(self._timeout_s)
        except concurrent.futures.TimeoutError:
            if not self._stalled:
                self._stalled = True
                log.warning("metrics reading timed out: the event loop did not answer; the "
                            "last reading is served", timeout_s=self._timeout_s)  # fmt: skip
        except Exception:
            log.exception("metrics reading failed; the last reading is served")
        return self._latest

    async def _refresh(self) -> T:
        self._latest = reading = await self._compute()
        self._stalled = False
        return reading
