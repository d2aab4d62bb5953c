"""A private asyncio event loop in a daemon thread, for Spark's synchronous callbacks.

The client is asyncio-based; Spark calls a data source from plain threads. One `LoopThread`
per reader keeps the client's connections, heartbeats and background tasks (lock renewal) alive
between Spark's calls, which `asyncio.run` per call could not do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any
from typing import TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "shoal-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (its exception is raised here)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        """Start `coro` as a task on the loop without waiting for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self, timeout: float = 10.0) -> None:
        """Cancel what is left on the loop, stop it and join the thread."""
        if not self.loop.is_running():
            return

        async def _cancel_rest() -> None:
            me = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not me]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            self.run(_cancel_rest(), timeout)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self.loop.close()
