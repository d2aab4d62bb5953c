"""The longest turn of the event loop while some work runs on it, in CPU seconds of the loop's
thread: other processes on a loaded machine stretch a turn's time on the clock, not its work.

For timing tests of a broker's services in the test's own loop (`make_server`, not started).
Automatic garbage collection is paused meanwhile, as the broker pauses it for a large request
(`broker.gc_pause`): a full collection walking the test's own objects is not the work measured.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def longest_turn(work: Awaitable[T]) -> tuple[T, float]:
    """`work`'s result, and the longest turn of the loop (CPU seconds) while it ran."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        task = asyncio.ensure_future(work)
        longest = 0.0
        while not task.done():
            started = time.thread_time()
            await asyncio.sleep(0)
            longest = max(longest, time.thread_time() - started)
        return await task, longest
    finally:
        if enabled:
            gc.enable()
