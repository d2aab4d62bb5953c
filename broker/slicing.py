"""Long request work cut into slices: yield to the event loop once a slice has run long enough.

No request may hold the loop for more than ~50 ms. A handler that loops over an unbounded
number of partitions calls `await slicer.pause()` after each unit of work (or maps a function
over them with `slicer.map`); the slicer yields only when its time budget is spent, so small
requests pay one clock read per unit and no more.

A handler yielding between slices still holds its connection's later requests back until it
answers (`broker.request_order`): they take effect after it, as if it had run at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from collections.abc import Iterable
from typing import TypeVar

SLICE_SECONDS = 0.010

T = TypeVar("T")
R = TypeVar("R")


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
            await self._yield()

    async def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """`[fn(item) for item in items]`, yielding to the loop between slices."""
        out: list[R] = []
        append = out.append
        clock = self._clock
        end = self._started + self._budget
        for item in items:
            append(fn(item))
            if clock() >= end:
                await self._yield()
                end = self._started + self._budget
        return out

    async def _yield(self) -> None:
        await asyncio.sleep(0)
        self.yields += 1
        self._started = self._clock()


async def sliced_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """`Slicer().map(fn, items)`: a list built in slices."""
    return await Slicer().map(fn, items)
