"""The broker-wide acquisition-lock timer: one heap of deadlines, keyed by share-partition.

Each share-partition keeps its own lock deadlines (`SharePartition.next_deadline()`); the
manager schedules that one deadline here after every operation and, when it falls due, plans
the expiry (`SharePartition.plan_expiry(now)`), writes it and applies it. So there is one heap
entry per partition with locks, not a timer per record or per batch.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


class AcquisitionLockTimer(Generic[K]):
    """Deadlines per key; a later `schedule` for a key replaces its earlier one.

    Replaced and cancelled entries stay in the heap and are skipped when popped (lazy
    deletion); the heap is rebuilt when stale entries outnumber live ones, so it stays
    O(keys) in size however often partitions reschedule.
    """

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, K]] = []
        self._live: dict[K, tuple[int, int]] = {}  # key -> (deadline, seq) of its live entry
        self._seq = itertools.count()

    def __len__(self) -> int:
        """Number of keys with a scheduled deadline."""
        return len(self._live)

    def schedule(self, key: K, deadline_ms: int) -> None:
        """Make `deadline_ms` the deadline of `key` (earlier or later than before)."""
        current = self._live.get(key)
        if current is not None and current[0] == deadline_ms:
            return
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()

    def cancel(self, key: K) -> None:
        self._live.pop(key, None)

    def deadline_of(self, key: K) -> int | None:
        current = self._live.get(key)
        return None if current is None else current[0]

    def next_deadline(self) -> int | None:
        """The earliest live deadline, or None when nothing is scheduled."""
        self._drop_stale_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[K]:
        """Remove and return, earliest first, every key whose deadline is <= now (once each)."""
        due: list[K] = []
        while self._heap and self._heap[0][0] <= now_ms:
            deadline, seq, key = heapq.heappop(self._heap)
            if self._live.get(key) == (deadline, seq):
                del self._live[key]
                due.append(key)
        return due

    def _drop_stale_top(self) -> None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            if self._live.get(key) == (deadline, seq):
                return
            heapq.heappop(self._heap)

    def _compact(self) -> None:
        self._heap = [(d, s, k) for k, (d, s) in self._live.items()]
        heapq.heapify(self._heap)
