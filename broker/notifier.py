"""Wakes long polls (Fetch, ShareFetch) when something changes on a partition they wait for."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from collections.abc import Iterable


def _time_up(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)


class Notifier:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[bool]]] = {}

    def notify(self, key: Hashable) -> None:
        if not self._waiters:  # every append notifies; most find nobody waiting
            return
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(True)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until any key is notified or the timeout passes; True if notified.

        The waiter's own future carries both outcomes (a timer handle ends it with False), so a
        notification resumes the waiting request in the next loop pass: `asyncio.wait_for`
        would relay it through a second future, one more pass of a busy loop per record."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        timer = loop.call_later(timeout_s, _time_up, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]
