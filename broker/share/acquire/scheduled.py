"""Scheduled delivery (issue 35, topic config `shoal.scheduled.delivery.enable`): a record with
the header `shoal.deliver.at.ms` is not acquired by any share group before that time.

Run before the policy the group calls for (`SharePartition.acquire`): the spans the fetch read
join the window up to the last record that waits, each waiting record as an AVAILABLE range
with its time (`ShareWindow.extend(..., not_before)`; records of one time side by side make one
range), within `max_record_locks`; then the policy runs as ever, and passes the waiting ranges
(`ShareWindow.acquire(..., now_ms)`): a stored batch holding a future record is handed out as
the ranges around it, and the rest of the partition flows.

Bounds. Waiting records are in the window, so they count against
`share.partition.max.record.locks`: a partition holds at most that many records in flight or
waiting, and once waiting records fill its window, nothing past them is acquired until the
earliest is due (the record-lock cap, as Kafka's `canAcquireRecords`). A fetch's cursor passes
waiting ranges at one comparison per range; headers are read only past `times_from` (what
this share-partition has already placed is not decoded again), about
`partition_reads.SCHEDULE_DECODE_RECORDS` records per fetch (the first batch whole).

Restarts. The times are not written as share state: they are in the log. After a restart (or
a reset) nothing is placed yet (`times_from` is SPSO), so the first fetches read the headers of
the window's records again and `hold` the AVAILABLE ones that must still wait.
"""

from __future__ import annotations

from bisect import bisect_left
from bisect import bisect_right

from broker.share.acquire.policy import AcquisitionPolicy
from broker.share.acquire.policy import Fetch
from broker.share.window import AcquiredRecords
from broker.share.window import ShareWindow

Run = tuple[int, int, int]  # first, last, delivery time


class Scheduled:
    """The schedule of one share-partition's window (state kept across fetches)."""

    __slots__ = ("_placed",)

    def __init__(self, start_offset: int) -> None:
        # Offsets below this had their headers read and their waits placed in the window.
        self._placed = start_offset

    def reset(self, start_offset: int) -> None:
        self._placed = start_offset

    def times_from(self, cursor: int) -> int:
        """The offset from which a fetch from `cursor` needs the records' delivery times."""
        return max(cursor, self._placed)

    def acquire(
        self, window: ShareWindow, fetch: Fetch, policy: AcquisitionPolicy
    ) -> list[AcquiredRecords]:
        placed = max(self._placed, window.start)
        now = fetch.now_ms
        runs = _runs(sorted((o, t) for o, t in (fetch.deliver_at or {}).items() if t > now))
        if runs:
            self._place(window, fetch, runs, placed)
        out = policy.acquire(window, fetch)
        if fetch.spans:  # every record of the spans that joined the window is placed now
            self._placed = max(placed, min(window.end, fetch.spans[-1].last_offset + 1))
        return out

    def _place(self, window: ShareWindow, fetch: Fetch, runs: list[Run], placed: int) -> None:
        """Bring the spans into the window up to the last waiting run: new records AVAILABLE
        (the waiting ones with their time), records already there and not placed held."""
        firsts = [r[0] for r in runs]
        last_wait = runs[-1][1]
        added_new = False
        for lo, last in window.walk(fetch.spans, fetch.cursor, fetch.committed):
            if lo < window.end:
                for first, end, at in _within(runs, firsts, max(lo, placed), last):
                    window.hold(first, end, at)
            if last >= window.end:
                if not window.may_extend(last, added_new, fetch.max_record_locks):
                    break
                added_new = True
                pos = max(lo, window.end)
                for first, end, at in _within(runs, firsts, pos, last):
                    if first > pos:
                        window.extend(pos, first - 1)
                    window.extend(first, end, at)
                    pos = end + 1
                if pos <= last:
                    window.extend(pos, last)
            if last >= last_wait:
                break


def _runs(waits: list[tuple[int, int]]) -> list[Run]:
    """Sorted (offset, time) pairs as runs of adjacent offsets with one time."""
    runs: list[Run] = []
    for offset, at in waits:
        if runs and runs[-1][1] + 1 == offset and runs[-1][2] == at:
            runs[-1] = (runs[-1][0], offset, at)
        else:
            runs.append((offset, offset, at))
    return runs


def _within(runs: list[Run], firsts: list[int], lo: int, hi: int) -> list[Run]:
    """The runs cut to [lo, hi]."""
    if lo > hi:
        return []
    i = max(bisect_right(firsts, lo) - 1, 0)
    j = bisect_left(firsts, hi + 1)
    out = []
    for first, last, at in runs[i:j]:
        first, last = max(first, lo), min(last, hi)
        if first <= last:
            out.append((first, last, at))
    return out
