"""Long request work cut into slices: yield to the event loop once a slice has run long enough.

No request may hold the loop for more than ~50 ms. A handler that loops over an unbounded
number of partitions calls `await slicer.pause()` after each unit of work; the slicer yields
only when its time budget is spent, so small requests pay one clock read per unit and no more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

SLICE_SECONDS = 0.010


class Slicer:
    def __init__(
        self, budget_s: float = SLICE_SECONDS, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._budget = budget_s
        self._clock = clock
        self._started = clock()
        self.yields = 0

    async def pause(self) -> None:
        """Yield to the loop if this slice has used its budget."""
        if self._clock() - self._started >= self._budget:
            await asyncio.sleep(0)
            self.yields += 1
            self._started = self._clock()
