"""The in-flight range structure of a share-partition and its lock-deadline index.

State is kept per range of offsets, not per record: a fetch of a 500-record batch adds one
range, an acknowledgement of that batch touches one range. A range is split only where an
operation covers part of it, and neighbours with identical state merge back straight away,
so the number of ranges equals the number of distinct runs in the window.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from broker.share.record_state import RecordState


@dataclass(slots=True)
class InFlightBatch:
    """Offsets [first, last] sharing one state, delivery count, owner and lock deadline.

    `member_id` and `deadline` are set only while the range is ACQUIRED; `not_before` (epoch
    ms, 0: none) only while it is AVAILABLE and waits (retry backoff, scheduled delivery).
    """

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    deadline: int | None = None
    not_before: int = 0

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def same_state(self, other: InFlightBatch) -> bool:
        return (
            self.state is other.state
            and self.delivery_count == other.delivery_count
            and self.member_id == other.member_id
            and self.deadline == other.deadline
            and self.not_before == other.not_before
        )


ARCHIVED = RecordState.ARCHIVED


def _first(batch: InFlightBatch) -> int:
    return batch.first


class InFlightRanges:
    """Ranges sorted by first offset that cover [start, end) with no holes.

    Index arithmetic stays inside this class; callers address ranges by offset and get back
    index pairs [i, j) that stay valid until the next structural call.
    """

    __slots__ = ("_batches", "_end", "_start")

    def __init__(self, start: int) -> None:
        self._batches: list[InFlightBatch] = []
        self._start = start
        self._end = start

    @property
    def start(self) -> int:
        return self._start

    @property
    def end(self) -> int:
        return self._end

    def __len__(self) -> int:
        return len(self._batches)

    def __iter__(self) -> Iterator[InFlightBatch]:
        return iter(self._batches)

    def view(self, i: int, j: int) -> list[InFlightBatch]:
        """The range objects at indices [i, j) (a copy of the list, the objects themselves)."""
        return self._batches[i:j]

    def first_range(self) -> InFlightBatch:
        """The range at the start (the window must not be empty)."""
        return self._batches[0]

    def overlapping(self, first: int, last: int) -> tuple[int, int]:
        """Indices [i, j) of the ranges meeting [first, last], which must lie in the window."""
        i = bisect_right(self._batches, first, key=_first) - 1
        j = bisect_right(self._batches, last, key=_first, lo=i)
        return i, j

    def isolate(self, first: int, last: int) -> tuple[int, int]:
        """Split so that ranges [i, j) cover exactly [first, last]; call merge(i, j) after."""
        i = self._boundary(first)
        return i, self._boundary(last + 1)

    def _boundary(self, offset: int) -> int:
        if offset >= self._end:
            return len(self._batches)
        i = bisect_right(self._batches, offset, key=_first) - 1
        batch = self._batches[i]
        if batch.first == offset:
            return i
        tail = InFlightBatch(
            offset, batch.last, batch.state, batch.delivery_count, batch.member_id, batch.deadline,
            batch.not_before,
        )  # fmt: skip
        batch.last = offset - 1
        self._batches.insert(i + 1, tail)
        return i + 1

    def merge(self, i: int, j: int) -> None:
        """Merge equal neighbours among ranges [i, j) and the one on each side."""
        lo, hi = max(i - 1, 0), min(j + 1, len(self._batches))
        if hi - lo < 2:
            return
        merged: list[InFlightBatch] = []
        for batch in self._batches[lo:hi]:
            if merged and merged[-1].same_state(batch):
                merged[-1].last = batch.last
            else:
                merged.append(batch)
        if len(merged) != hi - lo:
            self._batches[lo:hi] = merged

    def append(self, batch: InFlightBatch) -> None:
        """Extend the window by `batch`, which must start at `end`; merge_tail() after."""
        if batch.first != self._end:
            raise ValueError(f"range {batch.first} does not start at the window end {self._end}")
        self._batches.append(batch)
        self._end = batch.last + 1

    def append_archived(self, first: int, last: int) -> None:
        """Extend the window by [first, last] ARCHIVED, never delivered (`first` must be the
        end), joined to the last range if that is alike: what appending it AVAILABLE, moving
        it to ARCHIVED and `merge_tail` leave, in one step."""
        if first != self._end:
            raise ValueError(f"range {first} does not start at the window end {self._end}")
        batches = self._batches
        if batches:
            p = batches[-1]
            if (
                p.state is ARCHIVED
                and p.delivery_count == 0
                and p.member_id is None
                and p.deadline is None
                and not p.not_before
            ):
                p.last = last
                self._end = last + 1
                return
        batches.append(InFlightBatch(first, last, ARCHIVED, 0))
        self._end = last + 1

    def merge_tail(self) -> None:
        n = len(self._batches)
        self.merge(n - 1, n)

    def drop_leading_terminal(self) -> None:
        """Move the start over the leading run of ACKNOWLEDGED/ARCHIVED ranges."""
        k = 0
        for batch in self._batches:
            if not batch.state.is_terminal:
                break
            k += 1
        if k:
            del self._batches[:k]
            self._start = self._batches[0].first if self._batches else self._end

    def clear(self, start: int) -> None:
        self._batches.clear()
        self._start = self._end = start


class LockIndex:
    """Acquired-record counts per lock deadline, so expiry finds due ranges without a scan.

    For each live deadline it keeps the number of records holding it and the hull of their
    offsets: expiry visits only ranges inside the hulls of due deadlines. The heap of deadlines
    uses lazy deletion: a deadline whose records all left ACQUIRED is skipped when popped.
    """

    __slots__ = ("_groups", "_heap", "_records")

    def __init__(self) -> None:
        self._groups: dict[int, list[int]] = {}  # deadline -> [records, lo, hi]
        self._heap: list[int] = []
        self._records = 0

    @property
    def records(self) -> int:
        return self._records

    def add(self, deadline: int, first: int, last: int) -> None:
        group = self._groups.get(deadline)
        if group is None:
            self._groups[deadline] = [last - first + 1, first, last]
            heapq.heappush(self._heap, deadline)
        else:
            group[0] += last - first + 1
            group[1] = min(group[1], first)
            group[2] = max(group[2], last)
        self._records += last - first + 1

    def remove(self, deadline: int, records: int) -> None:
        group = self._groups[deadline]
        group[0] -= records
        self._records -= records
        if group[0] == 0:
            del self._groups[deadline]

    def next_deadline(self) -> int | None:
        while self._heap and self._heap[0] not in self._groups:
            heapq.heappop(self._heap)
        return self._heap[0] if self._heap else None

    def due_hulls(self, now_ms: int) -> list[tuple[int, int]]:
        """Disjoint, sorted offset hulls holding every record whose deadline is <= now.

        A read, not a pop: expiry is planned first and may not be applied (its durable write
        failed), and then the same deadlines must be found again. The heap is walked from the
        root down to the first child past `now`, so the cost is O(due entries).
        """
        hulls: list[tuple[int, int]] = []
        heap, stack = self._heap, [0]
        while stack:
            k = stack.pop()
            if k >= len(heap) or heap[k] > now_ms:
                continue
            group = self._groups.get(heap[k])
            if group is not None:
                hulls.append((group[1], group[2]))
            stack += (2 * k + 1, 2 * k + 2)
        hulls.sort()
        merged: list[tuple[int, int]] = []
        for lo, hi in hulls:
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        return merged

    def clear(self) -> None:
        self._groups.clear()
        self._heap.clear()
        self._records = 0


class WaitIndex:
    """AVAILABLE records that wait, counted per not-before time (retry backoff, scheduled
    delivery), so a fetch, the wake-up timer and the lag find the waits without a scan.

    A time that has passed is dropped (`prune`): its records are no longer waiting, though
    their ranges keep the time until they are acquired (a later `remove` of it is ignored).
    """

    __slots__ = ("_counts", "_heap", "_pruned_to", "_records")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}  # not-before -> records
        self._heap: list[int] = []
        self._records = 0
        self._pruned_to = 0  # times up to here are past: neither counted nor added again

    def add(self, not_before: int, records: int) -> None:
        if not_before <= self._pruned_to:
            return
        count = self._counts.get(not_before)
        if count is None:
            heapq.heappush(self._heap, not_before)
            count = 0
        self._counts[not_before] = count + records
        self._records += records

    def remove(self, not_before: int, records: int) -> None:
        count = self._counts.get(not_before)
        if count is None:  # pruned: its time has passed
            return
        self._records -= records
        if count > records:
            self._counts[not_before] = count - records
        else:
            del self._counts[not_before]

    def prune(self, now_ms: int) -> None:
        """Forget the times at or before `now_ms`: their records may be acquired."""
        heap, counts = self._heap, self._counts
        self._pruned_to = max(self._pruned_to, now_ms)
        while heap and (heap[0] <= now_ms or heap[0] not in counts):
            t = heapq.heappop(heap)
            self._records -= counts.pop(t, 0)

    def waiting(self, now_ms: int) -> int:
        """Records that may not be acquired yet at `now_ms`."""
        self.prune(now_ms)
        return self._records

    def next_time(self, now_ms: int) -> int | None:
        """The earliest not-before time after `now_ms`, or None."""
        self.prune(now_ms)
        return self._heap[0] if self._heap else None

    def clear(self) -> None:
        self._counts.clear()
        self._heap.clear()
        self._records = 0
        self._pruned_to = 0
