"""Wakes long polls (Fetch, ShareFetch) when something changes on a partition they wait for."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from collections.abc import Iterable


class Notifier:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future[None]]] = {}

    def notify(self, key: Hashable) -> None:
        if not self._waiters:  # every append notifies; most find nobody waiting
            return
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until any key is notified or the timeout passes; True if notified."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]
