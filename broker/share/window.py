"""ShareWindow: the in-flight records of one share-partition, and the one place they change.

The window runs from SPSO (`start`) to SPEO (`end`): below it everything is done, from `end` on
everything is AVAILABLE and never delivered. Inside, state is kept per range (`in_flight.py`),
so every operation costs O(ranges touched), never O(records). The window knows nothing of
members' requests, group configs, plans or durable writes: `SharePartition` decides what
should change, and an acquisition policy (`broker/share/acquire/`) decides which records a
fetch takes; both change records only through the calls below.

API (offsets are inclusive `first, last`; a call that would leave the table of
`RecordState.validate_transition` raises `InvalidStateTransition`):

Reading
  `start`, `end`, `available`, `acquired`, `archiving`, `open_records`, `len()`, iteration
  (the ranges themselves: read, never change them), `ranges_in(first, last)`,
  `first_available(now)`, `state_of(offset)`, `state_ranges()` (durable form),
  `next_deadline()`, `due_hulls(now)`, `waiting(now)`, `next_wait(now)`.
Acquiring (for the policies)
  `walk(spans, cursor, committed)`: the log's batches from `cursor` as data spans
      `(lo, last)`, gaps and control batches archived on the way (the one span walk of every
      policy); with `committed` (share.isolation.level=read_committed) it stops at the LSO
      and archives aborted transactions' batches too; the caller brings each span into the
      window (`acquire`, `extend`) before the next, or stops;
  `may_extend(last, added_new, max_locks)`: the record-lock cap;
  `acquire(lo, hi, member, deadline, out, limit, now_ms)`: AVAILABLE records of [lo, hi] in
      the window that do not wait past `now_ms`, and new ones past its end, become ACQUIRED,
      at most `limit`;
  `extend(first, last, not_before)`: new records join the window AVAILABLE (a policy that
      looks first), waiting until `not_before` if given (scheduled delivery);
  `archive_absent(first, last)`: the log holds nothing deliverable there;
  `hold(first, last, not_before)`: AVAILABLE records wait until `not_before` (a schedule
      read after a restart: not a durable change, the log's headers say it again).
Ending attempts (for `SharePartition`'s applied plans)
  `finish(first, last, target_of, wait_of)`: each range of [first, last] moves where
      `target_of` says (None: it stays), back to AVAILABLE waiting until `wait_of` says (retry
      backoff), and the move is recorded as a durable change;
  `renew(first, last, deadline)`: ACQUIRED records keep state and count, new deadline;
  `hand_over(first, last, owner)`: ACQUIRED records pass to a transaction, lock-free;
  `archive_below(offset)`: everything open below `offset` is ARCHIVED (a checkpoint records it);
  `advance_start()`: SPSO over the leading ACKNOWLEDGED/ARCHIVED records.
Durable changes and restore
  `take_changes()`: the durable ranges `finish` moved since the last call;
  `clear(start)`, `restore(spso, speo, ranges)`.
Watching
  `watch(fn)`: `fn(first, last)` is called whenever ACQUIRED records leave ACQUIRED (the
      key-ordered policy frees their keys then).

Waiting ("not before T"): an AVAILABLE range may carry `not_before`, epoch ms before which no
fetch acquires it (a released record's retry backoff, a scheduled record's delivery time). The
time is kept per range, like the lock deadline, and the waits are counted per time
(`WaitIndex`), so skipping them costs nothing per record; the rest of the window flows past.
A backoff wait is durable (`StateRange.not_before`, written with the release).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from broker.share.in_flight import InFlightBatch
from broker.share.in_flight import InFlightRanges
from broker.share.in_flight import LockIndex
from broker.share.in_flight import WaitIndex
from broker.share.record_state import RecordState

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVING = RecordState.ARCHIVING
ARCHIVED = RecordState.ARCHIVED


class BatchSpan(NamedTuple):
    """A record batch of the log as its header describes it; records are never decoded."""

    base_offset: int
    last_offset: int
    is_control: bool
    producer_id: int = -1  # the producer of a transactional batch; -1: not transactional


@dataclass(frozen=True, slots=True)
class ReadCommitted:
    """What share.isolation.level=read_committed lets a fetch take of the log (Kafka's
    `SharePartition.acquire` reading up to the LSO, then
    `maybeFilterAbortedTransactionalAcquiredRecords`): nothing at or past `stable_offset`
    (the LSO: the first offset of the oldest open transaction), and no batch of an aborted
    transaction. `aborted` maps a producer id to its aborted transactions met by the read, as
    `(first offset, ABORT marker offset)` from the aborted index: a batch is judged by its
    header (producer, base offset), never by its records."""

    stable_offset: int
    aborted: Mapping[int, Sequence[tuple[int, int]]]

    def is_aborted(self, span: BatchSpan) -> bool:
        if span.producer_id < 0 or not self.aborted:
            return False
        return any(
            first <= span.base_offset < marker
            for first, marker in self.aborted.get(span.producer_id, ())
        )


class AcquiredRecords(NamedTuple):
    """One AcquiredRecords entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


class StateRange(NamedTuple):
    """Durable form of a range: ACQUIRED is never stored (it is AVAILABLE with count - 1)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    not_before: int = 0  # AVAILABLE only: epoch ms before which it is not acquired; 0: none


TargetOf = Callable[[InFlightBatch], RecordState | None]
"""Where an ending attempt moves one range (isolated to the offsets asked); None: it stays."""
WaitOf = Callable[[InFlightBatch], int]
"""Until when a range moved back to AVAILABLE waits (epoch ms; 0: it does not)."""


class ShareWindow:
    """The ranges of [SPSO, SPEO), their lock deadlines and counters; see the module docstring."""

    __slots__ = (
        "_archiving", "_available", "_changes", "_locks", "_ranges", "_waits", "_watchers",
    )  # fmt: skip

    def __init__(self, start_offset: int) -> None:
        self._ranges = InFlightRanges(start_offset)
        self._locks = LockIndex()
        self._waits = WaitIndex()  # AVAILABLE records that wait, per not-before time
        # Records AVAILABLE inside the window: when zero, the next fetch starts at SPEO
        # without scanning the ranges.
        self._available = 0
        self._archiving = 0  # records ARCHIVING: open until their dead-letter copy is made
        self._changes: list[StateRange] = []
        self._watchers: tuple[Callable[[int, int], None], ...] = ()

    # ------------------------------------------------------------------------------ reading

    @property
    def start(self) -> int:
        return self._ranges.start

    @property
    def end(self) -> int:
        return self._ranges.end

    @property
    def available(self) -> int:
        return self._available

    @property
    def acquired(self) -> int:
        return self._locks.records

    @property
    def archiving(self) -> int:
        return self._archiving

    @property
    def open_records(self) -> int:
        """Records not yet ACKNOWLEDGED or ARCHIVED."""
        return self._available + self._locks.records + self._archiving

    def __len__(self) -> int:
        return len(self._ranges)

    def __iter__(self) -> Iterator[InFlightBatch]:
        return iter(self._ranges)

    def ranges_in(self, first: int, last: int) -> list[InFlightBatch]:
        """The ranges meeting [first, last], which must lie in the window (read only)."""
        i, j = self._ranges.overlapping(first, last)
        return self._ranges.view(i, j)

    def first_available(self, now_ms: int | None = None) -> int | None:
        """The first AVAILABLE offset; with `now_ms`, the first that does not wait past it."""
        if self._available:
            ready_at = None if now_ms is None or not self._waits.waiting(now_ms) else now_ms
            for batch in self._ranges:
                if batch.state is AVAILABLE:
                    if ready_at is not None and batch.not_before > ready_at:
                        continue
                    return batch.first
        return None

    def waiting(self, now_ms: int) -> int:
        """AVAILABLE records that may not be acquired yet at `now_ms` (lag's "delayed")."""
        return self._waits.waiting(now_ms)

    def next_wait(self, now_ms: int) -> int | None:
        """The earliest time after `now_ms` when waiting records may be acquired."""
        return self._waits.next_time(now_ms)

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count) of one offset; below the window ARCHIVED (count forgotten),
        from its end on AVAILABLE, never delivered."""
        if offset < self.start:
            return ARCHIVED, 0
        if offset >= self.end:
            return AVAILABLE, 0
        batch = self.ranges_in(offset, offset)[0]
        return batch.state, batch.delivery_count

    def state_ranges(self) -> list[StateRange]:
        """The whole window in durable form, adjacent equal ranges merged (a checkpoint)."""
        out: list[StateRange] = []
        for b in self._ranges:
            append_merged(out, durable(b))
        return out

    def next_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record."""
        return self._locks.next_deadline()

    def due_hulls(self, now_ms: int) -> list[tuple[int, int]]:
        """Sorted, disjoint offset hulls holding every record whose lock is due by `now_ms`."""
        return self._locks.due_hulls(now_ms)

    def take_changes(self) -> list[StateRange]:
        """Durable ranges `finish` changed since the last call (later changes win), then clear."""
        changes, self._changes = self._changes, []
        # One change or none (each ACCEPT at a steady rate) is normalised already.
        return changes if len(changes) < 2 else normalise(changes)

    # ---------------------------------------------------------------------------- acquiring

    def walk(
        self, spans: Sequence[BatchSpan], cursor: int, committed: ReadCommitted | None = None
    ) -> Iterator[tuple[int, int]]:
        """The data batches of `spans` from `cursor` on, as `(lo, last)`; offsets the log
        does not hold (gaps before or between spans) and control batches are archived on the
        way, never handed out. With `committed`, the walk ends at the first batch reaching
        the LSO (a transaction starts a batch, so none straddles it), and the batches of
        aborted transactions are archived as control batches are (Kafka archives them: the
        SPSO moves past them as past acknowledged records). The caller brings each span past
        the window's end into it (`acquire`, `extend`) before asking for the next, or stops:
        nothing past is touched."""
        stable = committed.stable_offset if committed is not None else None
        for span in spans:
            cursor = max(cursor, self.start)  # archiving may have moved SPSO past the cursor
            if span.last_offset < cursor:
                continue
            if stable is not None and span.last_offset >= stable:
                return  # at the LSO: what follows waits for its transaction to end
            lo = max(span.base_offset, cursor)
            self.archive_absent(cursor, lo - 1)
            cursor = span.last_offset + 1
            if span.is_control or (committed is not None and committed.is_aborted(span)):
                self.archive_absent(lo, span.last_offset)
                continue
            yield lo, span.last_offset

    def may_extend(self, last: int, added_new: bool, max_locks: int) -> bool:
        """Whether the window may grow to hold `last` within `max_locks` records: the first
        new batch of a fetch (`added_new` false) goes whole if the window has room for one."""
        if last + 1 - self.start <= max_locks:
            return True
        return not added_new and self.end - self.start < max_locks

    def acquire(
        self,
        lo: int,
        hi: int,
        member_id: str,
        deadline: int,
        out: list[AcquiredRecords],
        limit: int | None = None,
        now_ms: int = 0,
    ) -> int:
        """AVAILABLE records of [lo, hi] become `member_id`'s until `deadline`: those in the
        window that do not wait past `now_ms`, then new ones from its end on; at most `limit`
        (None: all), in offset order. The ranges taken are added to `out`; how many records."""
        taken = 0
        lo = max(lo, self.start)  # archiving a gap just before may have moved SPSO past lo
        in_flight_hi = min(hi, self.end - 1)
        if lo <= in_flight_hi and self._available:
            i, j = self._ranges.overlapping(lo, in_flight_hi)
            if any(_ready(b, now_ms) for b in self._ranges.view(i, j)):
                if limit is not None:
                    in_flight_hi = self._limit_end(i, j, lo, in_flight_hi, limit, now_ms)
                i, j = self._ranges.isolate(lo, in_flight_hi)
                for b in self._ranges.view(i, j):
                    if _ready(b, now_ms):
                        self._move(b, ACQUIRED, member_id, deadline)
                        emit(out, b.first, b.last, b.delivery_count)
                        taken += b.size
                self._ranges.merge(i, j)
        if limit is not None:
            if taken >= limit:
                return taken
            hi = min(hi, max(lo, self.end) + limit - taken - 1)
        new_lo = max(lo, self.end)
        if new_lo <= hi:
            batch = self._append_available(new_lo, hi)
            self._move(batch, ACQUIRED, member_id, deadline)
            self._ranges.merge_tail()
            emit(out, new_lo, hi, 1)
            taken += hi - new_lo + 1
        return taken

    def _limit_end(self, i: int, j: int, lo: int, hi: int, limit: int, now_ms: int) -> int:
        """The offset in [lo, hi] where the acquirable records of ranges [i, j) reach `limit`,
        or `hi` if they never do: one step per range, not per record."""
        for b in self._ranges.view(i, j):
            if not _ready(b, now_ms):
                continue
            first, last = max(b.first, lo), min(b.last, hi)
            if last - first + 1 >= limit:
                return first + limit - 1
            limit -= last - first + 1
        return hi

    def extend(self, first: int, last: int, not_before: int = 0) -> None:
        """Records [first, last], from the window's end on, join it AVAILABLE, waiting until
        `not_before` if it is set."""
        batch = self._append_available(first, last)
        if not_before:
            batch.not_before = not_before
            self._waits.add(not_before, batch.size)
        self._ranges.merge_tail()

    def archive_absent(self, first: int, last: int) -> None:
        """Archive [first, last]: the log holds nothing deliverable there. Not recorded as a
        durable change: the next fetch after a restart archives it again from the log."""
        ranges = self._ranges
        if first >= ranges.end:  # nearly always (a control batch met at the end): appended
            if first <= last:
                ranges.append_archived(first, last)
                ranges.drop_leading_terminal()
            return
        self.archive_absent_in_place(first, last)

    def archive_absent_in_place(self, first: int, last: int) -> None:
        """`archive_absent` by moving ranges (whatever [first, last] meets): what the one-step
        append of the common case must equal (`tests/unit/test_share_window.py`)."""
        first = max(first, self.start)
        if first > last:
            return
        in_flight_hi = min(last, self.end - 1)
        if first <= in_flight_hi and self._available:
            i, j = self._ranges.isolate(first, in_flight_hi)
            for b in self._ranges.view(i, j):
                if b.state is AVAILABLE:
                    self._move(b, ARCHIVED)
            self._ranges.merge(i, j)
        new_lo = max(first, self.end)
        if new_lo <= last:
            self._move(self._append_available(new_lo, last), ARCHIVED)
            self._ranges.merge_tail()
        self.advance_start()

    def hold(self, first: int, last: int, not_before: int) -> None:
        """AVAILABLE records of [first, last] (clipped to the window) wait until `not_before`
        at least. Not a transition, nor a durable change (scheduled delivery: the records'
        headers say it again after a restart)."""
        first, last = max(first, self.start), min(last, self.end - 1)
        if first > last or not self._available:
            return
        i, j = self._ranges.isolate(first, last)
        for b in self._ranges.view(i, j):
            if b.state is AVAILABLE and b.not_before < not_before:
                if b.not_before:
                    self._waits.remove(b.not_before, b.size)
                b.not_before = not_before
                self._waits.add(not_before, b.size)
        self._ranges.merge(i, j)

    def _append_available(self, first: int, last: int) -> InFlightBatch:
        # Offsets from SPEO on are AVAILABLE with count 0; they enter the window as such and
        # then move through the transition table like any other record.
        batch = InFlightBatch(first, last, AVAILABLE, 0)
        self._ranges.append(batch)
        self._available += batch.size
        return batch

    # ----------------------------------------------------------------------- ending attempts

    def finish(
        self, first: int, last: int, target_of: TargetOf, wait_of: WaitOf | None = None
    ) -> int:
        """Move each range of [first, last] (clipped to the window) where `target_of` says,
        one moved back to AVAILABLE waiting until `wait_of` says, recording each move as a
        durable change; how many records moved."""
        ranges = self._ranges
        first, last = max(first, ranges.start), min(last, ranges.end - 1)
        if first > last:
            return 0
        moved = 0
        changes = self._changes
        i, j = ranges.isolate(first, last)
        for b in ranges.view(i, j):
            target = target_of(b)
            if target is not None:
                wait = wait_of(b) if wait_of is not None and target is AVAILABLE else 0
                self._move(b, target, not_before=wait)
                changes.append(StateRange(b.first, b.last, target, b.delivery_count, wait))
                moved += b.size
        ranges.merge(i, j)
        return moved

    def sole_hold(self, member_id: str, first: int, last: int) -> InFlightBatch | None:
        """The window's first range if it is exactly [first, last], ACQUIRED by `member_id`
        under a lock deadline, and every open record of the window (what follows it is
        ACKNOWLEDGED or ARCHIVED: the control batch of the last write, typically), else None:
        the check that chooses `accept_sole` (a steady-rate ACCEPT of all a member holds)."""
        ranges = self._ranges
        if ranges.start != first or last < first or self.open_records != last - first + 1:
            return None
        b = ranges.first_range()
        if (
            b.last != last
            or b.state is not ACQUIRED
            or b.member_id != member_id
            or b.deadline is None
        ):
            return None
        return b

    def accept_sole(self, b: InFlightBatch) -> None:
        """ACCEPT of the range `sole_hold` returned, nothing changed since: what `finish`
        over it with the target ACKNOWLEDGED, then `advance_start`, do (the same move, the
        same durable change recorded; every range is terminal then, so SPSO moves to SPEO),
        without isolating or merging."""
        # `_move(b, ACKNOWLEDGED)` for an ACQUIRED range under a lock (never waiting): the
        # lock counted off, the watchers told; AVAILABLE and ARCHIVING counts stay.
        size = b.last - b.first + 1
        assert b.deadline is not None and not b.not_before
        self._locks.remove(b.deadline, size)
        for watcher in self._watchers:
            watcher(b.first, b.last)
        b.state, b.member_id, b.deadline = ACKNOWLEDGED, None, None
        self._changes.append(StateRange(b.first, b.last, ACKNOWLEDGED, b.delivery_count, 0))
        self._ranges.drop_leading_terminal()

    def renew(self, first: int, last: int, deadline: int) -> None:
        """ACQUIRED records of [first, last] (clipped to the window) keep their owner, state
        and count, with a new lock deadline (RENEW is not a transition)."""
        first, last = max(first, self.start), min(last, self.end - 1)
        if first > last:
            return
        i, j = self._ranges.isolate(first, last)
        for b in self._ranges.view(i, j):
            self._move(b, ACQUIRED, b.member_id, deadline)
        self._ranges.merge(i, j)

    def hand_over(self, first: int, last: int, owner: str) -> None:
        """ACQUIRED records of [first, last] (the caller checked them) keep state and count and
        pass to `owner` with no lock deadline: a transaction's staged acknowledgement
        (`broker/share/txn_acks.py`), which its transaction's end releases, not the timer."""
        i, j = self._ranges.isolate(first, last)
        for b in self._ranges.view(i, j):
            self._move(b, ACQUIRED, owner, None)
        self._ranges.merge(i, j)

    def archive_below(self, offset: int) -> None:
        """Every record below `offset` not yet ACKNOWLEDGED or ARCHIVED is ARCHIVED (not
        recorded as a change: the caller writes the window whole), and SPSO moves over them;
        a window that ends below `offset` starts afresh there."""
        cut = min(offset, self.end)
        if cut > self.start:
            i, j = self._ranges.isolate(self.start, cut - 1)
            for b in self._ranges.view(i, j):
                if not b.state.is_terminal:
                    self._move(b, ARCHIVED)
            self._ranges.merge(i, j)
        self.advance_start()
        if self.end < offset:  # nothing left in flight: the window starts afresh
            self._ranges.clear(offset)

    def advance_start(self) -> None:
        self._ranges.drop_leading_terminal()

    def _move(
        self,
        b: InFlightBatch,
        new: RecordState,
        member_id: str | None = None,
        deadline: int | None = None,
        not_before: int = 0,
    ) -> None:
        """The one place a range changes state, owner, deadline or wait; keeps the counters
        right. `not_before` is kept only by a move to AVAILABLE.

        ACQUIRED -> ACQUIRED is a RENEW (new deadline, same count), not a state transition.
        """
        if b.state is ACQUIRED and b.deadline is not None:
            self._locks.remove(b.deadline, b.size)
        if b.not_before:
            self._waits.remove(b.not_before, b.size)
            b.not_before = 0
        if not_before and new is AVAILABLE:
            self._waits.add(not_before, b.size)
            b.not_before = not_before
        renew = new is ACQUIRED and b.state is ACQUIRED
        if b.state is ACQUIRED and not renew and self._watchers:
            for watcher in self._watchers:
                watcher(b.first, b.last)
        if not renew:
            b.state.validate_transition(new)
            if new is ACQUIRED:
                b.delivery_count += 1
            self._available += b.size * ((new is AVAILABLE) - (b.state is AVAILABLE))
            self._archiving += b.size * ((new is ARCHIVING) - (b.state is ARCHIVING))
        if new is ACQUIRED and deadline is not None:
            self._locks.add(deadline, b.first, b.last)
        b.state, b.member_id, b.deadline = new, member_id, deadline

    # ------------------------------------------------------------ restore, reset, watching

    def clear(self, start_offset: int) -> None:
        """No record in flight; the window starts at `start_offset`; pending changes dropped."""
        self._ranges.clear(start_offset)
        self._locks.clear()
        self._waits.clear()
        self._available = 0
        self._archiving = 0
        self._changes.clear()

    def restore(self, spso: int, speo: int, ranges: Sequence[StateRange]) -> None:
        """The window as durable state records it (see `SharePartition.restore`).

        :raises ValueError: SPEO below SPSO, overlapping ranges, or ACQUIRED (never durable).
        """
        if speo < spso:
            raise ValueError(f"SPEO {speo} is below SPSO {spso}")
        self.clear(spso)
        cursor = spso
        for r in sorted(ranges, key=lambda r: r.first_offset):
            if r.state is ACQUIRED:
                raise ValueError(f"ACQUIRED is never durable: {r}")
            first = max(r.first_offset, spso)
            if r.last_offset < first:
                continue
            if first < cursor:
                raise ValueError(f"range {r} overlaps the one before it")
            if first > cursor:
                self._append_available(cursor, first - 1)
            self._restore_range(first, r)
            cursor = r.last_offset + 1
        if cursor < speo:
            self._append_available(cursor, speo - 1)
            self._ranges.merge_tail()
        self.advance_start()

    def _restore_range(self, first: int, r: StateRange) -> None:
        """Append durable range `r` from `first` on, with its counters (and wait)."""
        wait = r.not_before if r.state is AVAILABLE else 0
        batch = InFlightBatch(first, r.last_offset, r.state, r.delivery_count, not_before=wait)
        self._ranges.append(batch)
        if r.state is AVAILABLE:
            self._available += batch.size
            if wait:
                self._waits.add(wait, batch.size)
        if r.state is ARCHIVING:
            self._archiving += batch.size
        self._ranges.merge_tail()

    def watch(self, watcher: Callable[[int, int], None]) -> None:
        """Call `watcher(first, last)` whenever ACQUIRED records leave ACQUIRED."""
        self._watchers = (*self._watchers, watcher)


# ------------------------------------------------------------------------------- helpers


def _ready(b: InFlightBatch, now_ms: int) -> bool:
    """Whether a fetch at `now_ms` may acquire range `b`: AVAILABLE, and not waiting."""
    return b.state is AVAILABLE and b.not_before <= now_ms


def durable(b: InFlightBatch) -> StateRange:
    if b.state is ACQUIRED:
        return StateRange(b.first, b.last, AVAILABLE, b.delivery_count - 1)
    return StateRange(b.first, b.last, b.state, b.delivery_count, b.not_before)


def append_merged(out: list[StateRange], r: StateRange) -> None:
    """Append `r` to the sorted ranges `out`, joined to the last one if they touch alike."""
    if out:
        p = out[-1]
        if (
            p.last_offset + 1 == r.first_offset
            and p.state is r.state
            and p.delivery_count == r.delivery_count
            and p.not_before == r.not_before
        ):
            out[-1] = p._replace(last_offset=r.last_offset)
            return
    out.append(r)


def normalise(changes: list[StateRange]) -> list[StateRange]:
    """Sorted, disjoint, merged; where changes overlap the later one wins."""
    painted: list[StateRange] = []
    for c in changes:
        if not painted or c.first_offset > painted[-1].last_offset:
            painted.append(c)
            continue
        kept: list[StateRange] = []
        for p in painted:
            if p.last_offset < c.first_offset or p.first_offset > c.last_offset:
                kept.append(p)
                continue
            if p.first_offset < c.first_offset:
                kept.append(p._replace(last_offset=c.first_offset - 1))
            if p.last_offset > c.last_offset:
                kept.append(p._replace(first_offset=c.last_offset + 1))
        kept.append(c)
        painted = sorted(kept, key=lambda r: r.first_offset)
    out: list[StateRange] = []
    for r in painted:
        append_merged(out, r)
    return out


def emit(out: list[AcquiredRecords], first: int, last: int, count: int) -> None:
    """Add [first, last] to `out`, joined to the last entry if it continues it alike."""
    if out and out[-1].last_offset + 1 == first and out[-1].delivery_count == count:
        out[-1] = AcquiredRecords(out[-1].first_offset, last, count)
    else:
        out.append(AcquiredRecords(first, last, count))
