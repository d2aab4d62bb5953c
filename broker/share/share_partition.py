"""SharePartition: the in-flight state of one (group, topic, partition) (KIP-932).

Sans-IO: synchronous, no clock of its own (every method that needs time takes `now_ms`), no
storage. The broker hands in the log's batch headers as `BatchSpan`s and gets back the
`AcquiredRecords` ranges of a ShareFetch response; the durable-state code reads
`take_changes()` after each operation and writes them as a SHARE_DELTA.

The window is [SPSO, SPEO): below SPSO everything is done, from SPEO on everything is available
and never delivered. Inside, state is kept per range (see `in_flight.py`), so a fetch or an
acknowledgement costs O(ranges touched + log ranges), never O(records).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from enum import Enum
from itertools import groupby

from kio.schema.errors import ErrorCode

from broker.share.in_flight import InFlightBatch
from broker.share.in_flight import InFlightRanges
from broker.share.in_flight import LockIndex
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED

_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)

AckBatch = tuple[int, int, Sequence[int]]
"""(first offset, last offset, acknowledge types): one type for the range, or one per offset."""

SharePartitionKey = tuple[str, uuid.UUID, int]
"""(group id, topic id, partition)."""


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The effective group limits, read afresh at every operation (group configs change)."""

    delivery_count_limit: int
    max_record_locks: int
    lock_duration_ms: int
    renew_enabled: bool


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """A record batch of the log as its header describes it; records are never decoded."""

    base_offset: int
    last_offset: int
    is_control: bool


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """One AcquiredRecords entry of a ShareFetch response."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateRange:
    """Durable form of a range: ACQUIRED is never stored (it is AVAILABLE with count - 1)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


class Moved(Enum):
    """Why records moved, as a plan says: callers count these and never infer them from the
    states the records reached (a GAP and a release at the limit both end ARCHIVED)."""

    ACCEPTED = "accepted"  # ACQUIRED -> ACKNOWLEDGED
    REJECTED = "rejected"  # ACQUIRED -> ARCHIVED by REJECT
    GAP = "gap"  # ACQUIRED -> ARCHIVED by GAP: the client found no record there
    RELEASED = "released"  # ACQUIRED -> AVAILABLE: RELEASE, lock expiry or the member's departure
    DELIVERY_LIMIT = "delivery limit"  # ACQUIRED -> ARCHIVED: released at the delivery limit
    RENEWED = "renewed"  # ACQUIRED, with a new lock deadline


@dataclass(frozen=True, slots=True)
class Outcome:
    """Records a plan moves, by why; what `apply` returns."""

    moved: Mapping[Moved, int] = field(default_factory=dict, hash=False)

    def __getitem__(self, why: Moved) -> int:
        return self.moved.get(why, 0)


@dataclass(frozen=True, slots=True)
class Plan:
    """A change computed against the current state and not yet applied (two-phase, as Kafka).

    `changes` are the durable ranges the change will produce: the caller writes them first and
    applies the plan only once they are stored, so memory is never ahead of what recovery can
    rebuild. A plan is applied in the same synchronous step as it was made, or dropped.
    """

    member_id: str | None
    runs: tuple[tuple[int, int, AcknowledgeType], ...]
    delivery_count_limit: int
    lock_duration_ms: int
    changes: tuple[StateRange, ...]
    outcome: Outcome

    @property
    def records(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.runs)


@dataclass(frozen=True, slots=True)
class StartPlan:
    """The window once the log start moves up to `log_start` (DeleteRecords), not yet applied.

    What a new checkpoint records: SPSO and SPEO after the move and the durable ranges from
    SPSO on. The records still open below `log_start` (AVAILABLE, or ACQUIRED by a member whose
    acknowledgement then fails) are `archived`.
    """

    log_start: int
    start_offset: int
    end_offset: int
    ranges: tuple[StateRange, ...]
    archived: int


class SharePartition:
    """In-flight records of one share-partition: acquisition, acknowledgement, lock expiry."""

    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        start_offset: int,
        limits: Callable[[], ShareLimits],
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self._limits = limits
        self._ranges = InFlightRanges(start_offset)
        self._locks = LockIndex()
        # Records AVAILABLE inside the window: when zero, the next fetch starts at SPEO
        # without scanning the ranges.
        self._available = 0
        self._changes: list[StateRange] = []

    # ----------------------------------------------------------------------------- queries

    @property
    def key(self) -> SharePartitionKey:
        return (self.group_id, self.topic_id, self.partition)

    @property
    def spso(self) -> int:
        return self._ranges.start

    @property
    def speo(self) -> int:
        return self._ranges.end

    def in_flight_count(self) -> int:
        return self.speo - self.spso

    def acquired_count(self) -> int:
        return self._locks.records

    def open_records(self) -> int:
        """Records of the window not yet ACKNOWLEDGED or ARCHIVED."""
        return self._available + self._locks.records

    def range_count(self) -> int:
        """Number of internal ranges (equals the number of distinct runs: ranges merge)."""
        return len(self._ranges)

    def in_flight(self) -> list[InFlightBatch]:
        """A copy of the internal ranges, for describe APIs and tests."""
        return [
            InFlightBatch(b.first, b.last, b.state, b.delivery_count, b.member_id, b.deadline)
            for b in self._ranges
        ]

    def next_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record, for the broker-wide timer."""
        return self._locks.next_deadline()

    def next_fetch_offset(self) -> int | None:
        """Where the broker should read the log from; None when the window is full."""
        if self._available:
            for batch in self._ranges:
                if batch.state is AVAILABLE:
                    return batch.first
        if self.speo - self.spso >= self._limits().max_record_locks:
            return None
        return self.speo

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count) of one offset. Below SPSO everything counts as ARCHIVED
        (its count is forgotten); from SPEO on everything is AVAILABLE, never delivered."""
        if offset < self.spso:
            return ARCHIVED, 0
        if offset >= self.speo:
            return AVAILABLE, 0
        i, _ = self._ranges.overlapping(offset, offset)
        batch = self._ranges.view(i, i + 1)[0]
        return batch.state, batch.delivery_count

    def state_ranges(self) -> list[StateRange]:
        """The whole window in durable form, adjacent equal ranges merged (a checkpoint)."""
        out: list[StateRange] = []
        for b in self._ranges:
            _append_merged(out, _durable(b))
        return out

    def take_changes(self) -> list[StateRange]:
        """Durable-form ranges changed since the last call (later changes win), then clear.

        Only changes that a restart could not rebuild are listed: acquisition and RENEW leave
        the durable form as it was (ACQUIRED is stored as AVAILABLE with count - 1), and
        control batches and log gaps are archived again from the log on the next fetch.
        """
        changes, self._changes = self._changes, []
        return _normalise(changes)

    # ------------------------------------------------------------------------- acquisition

    def acquire(
        self, member_id: str, spans: Sequence[BatchSpan], *, max_records: int, now_ms: int
    ) -> list[AcquiredRecords]:
        """Acquire records for `member_id` from the log batches `spans`.

        `spans` start at the batch holding `next_fetch_offset()` and run in log order. Whole
        batches are taken (MaxRecords may be exceeded to keep batch boundaries): first the
        AVAILABLE in-flight records they hold, then new records at and after SPEO while the
        window stays within `max_record_locks` (the first new batch is allowed whenever the
        window has room for one record). Control batches and offsets missing from the log
        (gaps before or between spans) are archived, never handed out.
        """
        cursor = self.next_fetch_offset()
        if cursor is None or max_records <= 0:
            return []
        limits = self._limits()
        deadline = now_ms + limits.lock_duration_ms
        out: list[AcquiredRecords] = []
        taken = 0
        added_new = False
        for span in spans:
            cursor = max(cursor, self.spso)  # archiving may have moved SPSO past the cursor
            if span.last_offset < cursor:
                continue
            lo = max(span.base_offset, cursor)
            self._archive_absent(cursor, lo - 1)
            if span.is_control:
                self._archive_absent(lo, span.last_offset)
                cursor = span.last_offset + 1
                continue
            if span.last_offset >= self.speo:
                if not self._may_extend(span.last_offset, added_new, limits.max_record_locks):
                    break
                added_new = True
            taken += self._acquire_span(member_id, lo, span.last_offset, deadline, out)
            cursor = span.last_offset + 1
            if taken >= max_records:
                break
        return out

    def _may_extend(self, last: int, added_new: bool, max_locks: int) -> bool:
        if last + 1 - self.spso <= max_locks:
            return True
        # The first new batch of a fetch goes whole if the window has room for one record.
        return not added_new and self.speo - self.spso < max_locks

    def _acquire_span(
        self, member_id: str, lo: int, hi: int, deadline: int, out: list[AcquiredRecords]
    ) -> int:
        taken = 0
        lo = max(lo, self.spso)  # archiving a gap just before may have moved SPSO past lo
        in_flight_hi = min(hi, self.speo - 1)
        if lo <= in_flight_hi and self._available:
            i, j = self._ranges.overlapping(lo, in_flight_hi)
            if any(b.state is AVAILABLE for b in self._ranges.view(i, j)):
                i, j = self._ranges.isolate(lo, in_flight_hi)
                for b in self._ranges.view(i, j):
                    if b.state is AVAILABLE:
                        self._move(b, ACQUIRED, member_id, deadline)
                        _emit(out, b.first, b.last, b.delivery_count)
                        taken += b.size
                self._ranges.merge(i, j)
        new_lo = max(lo, self.speo)
        if new_lo <= hi:
            batch = self._append_available(new_lo, hi)
            self._move(batch, ACQUIRED, member_id, deadline)
            self._ranges.merge_tail()
            _emit(out, new_lo, hi, 1)
            taken += hi - new_lo + 1
        return taken

    def _archive_absent(self, first: int, last: int) -> None:
        """Archive [first, last]: the log holds nothing deliverable there."""
        first = max(first, self.spso)
        if first > last:
            return
        in_flight_hi = min(last, self.speo - 1)
        if first <= in_flight_hi and self._available:
            i, j = self._ranges.isolate(first, in_flight_hi)
            for b in self._ranges.view(i, j):
                if b.state is AVAILABLE:
                    self._move(b, ARCHIVED)
            self._ranges.merge(i, j)
        new_lo = max(first, self.speo)
        if new_lo <= last:
            self._move(self._append_available(new_lo, last), ARCHIVED)
            self._ranges.merge_tail()
        self._advance_spso()

    def _append_available(self, first: int, last: int) -> InFlightBatch:
        # Offsets from SPEO on are AVAILABLE with count 0; they enter the window as such and
        # then move through the transition table like any other record.
        batch = InFlightBatch(first, last, AVAILABLE, 0)
        self._ranges.append(batch)
        self._available += batch.size
        return batch

    # --------------------------------------------------------------------- acknowledgement

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], *, now_ms: int) -> ErrorCode:
        """Plan and apply at once (no durable write in between): for tests and tools."""
        plan = self.plan_acknowledge(member_id, batches)
        if isinstance(plan, ErrorCode):
            return plan
        self.apply(plan, now_ms=now_ms)
        return ErrorCode.none

    def plan_acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> Plan | ErrorCode:
        """Check acknowledgement batches and plan them: all of them, or none with an error.

        INVALID_REQUEST: unknown type, first > last, unsorted or overlapping batches, or a
        types list that is neither one type nor one per offset. INVALID_RECORD_STATE: a non-GAP
        offset outside the window, not ACQUIRED, or acquired by another member; or RENEW while
        renewal is disabled. A GAP offset is never an error: it is archived if this member
        holds it, else left alone (a gap between log batches is archived on acquisition).
        """
        runs = _parse_acks(batches)
        if isinstance(runs, ErrorCode):
            return runs
        limits = self._limits()
        for first, last, ack in runs:
            if ack is AcknowledgeType.GAP:
                continue
            if ack is AcknowledgeType.RENEW and not limits.renew_enabled:
                return ErrorCode.invalid_record_state
            if not self._held_by(member_id, first, last):
                return ErrorCode.invalid_record_state
        return self._plan(member_id, runs, limits)

    def plan_expiry(self, now_ms: int) -> Plan:
        """Release every record whose lock deadline is <= now (planned, not applied)."""
        runs = []
        for lo, hi in self._locks.due_hulls(now_ms):
            lo, hi = max(lo, self.spso), min(hi, self.speo - 1)
            if lo > hi:
                continue
            i, j = self._ranges.overlapping(lo, hi)
            for b in self._ranges.view(i, j):
                if b.state is ACQUIRED and b.deadline is not None and b.deadline <= now_ms:
                    runs.append((b.first, b.last, AcknowledgeType.RELEASE))
        return self._plan(None, runs, self._limits())

    def holders(self, runs: Sequence[tuple[int, int, AcknowledgeType]]) -> list[str]:
        """The members holding acquired records in `runs`, before the plan is applied (for log
        lines: who was too slow). O(ranges touched)."""
        members: dict[str, None] = {}
        for first, last, _ in runs:
            i, j = self._ranges.overlapping(first, last)
            for b in self._ranges.view(i, j):
                if b.state is ACQUIRED and b.member_id is not None:
                    members[b.member_id] = None
        return list(members)

    def plan_member_release(self, member_id: str) -> Plan:
        """Release every record `member_id` holds (it left or timed out)."""
        runs = [
            (b.first, b.last, AcknowledgeType.RELEASE)
            for b in self._ranges
            if b.state is ACQUIRED and b.member_id == member_id
        ]
        return self._plan(None, runs, self._limits())

    def _plan(
        self,
        member_id: str | None,
        runs: Sequence[tuple[int, int, AcknowledgeType]],
        limits: ShareLimits,
    ) -> Plan:
        """The durable ranges `runs` will produce, and why each record moves, read off the
        current ranges (no change)."""
        changes: list[StateRange] = []
        moved: Counter[Moved] = Counter()
        for first, last, ack in runs:
            first, last = max(first, self.spso), min(last, self.speo - 1)
            if first > last:  # only a GAP run can lie outside the window
                continue
            i, j = self._ranges.overlapping(first, last)
            for b in self._ranges.view(i, j):
                lo, hi = max(b.first, first), min(b.last, last)
                target = _ack_target(b, ack, member_id, limits.delivery_count_limit)
                why = _why(ack, target)
                if why is not None:
                    moved[why] += hi - lo + 1
                if target is not None:
                    changes.append(StateRange(lo, hi, target, b.delivery_count))
        return Plan(
            member_id,
            tuple(runs),
            limits.delivery_count_limit,
            limits.lock_duration_ms,
            tuple(_normalise(changes)),
            Outcome(dict(moved)),
        )

    def apply(self, plan: Plan, *, now_ms: int) -> Outcome:
        """Apply a plan made by one of the `plan_*` methods, with no change in between; what
        moved and why."""
        for first, last, ack in plan.runs:
            self._apply_ack(plan, first, last, ack, now_ms)
        self._advance_spso()
        return plan.outcome

    def _held_by(self, member_id: str, first: int, last: int) -> bool:
        if first < self.spso or last >= self.speo:
            return False
        i, j = self._ranges.overlapping(first, last)
        return all(
            b.state is ACQUIRED and b.member_id == member_id for b in self._ranges.view(i, j)
        )

    def _apply_ack(
        self, plan: Plan, first: int, last: int, ack: AcknowledgeType, now_ms: int
    ) -> None:
        first, last = max(first, self.spso), min(last, self.speo - 1)
        if first > last:  # only a GAP run can lie outside the window
            return
        i, j = self._ranges.isolate(first, last)
        for b in self._ranges.view(i, j):
            if ack is AcknowledgeType.RENEW:
                self._move(b, ACQUIRED, b.member_id, now_ms + plan.lock_duration_ms)
                continue
            target = _ack_target(b, ack, plan.member_id, plan.delivery_count_limit)
            if target is not None:
                self._finish(b, target)
        self._ranges.merge(i, j)

    # ------------------------------------------------------------------ locks and members

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose lock deadline is <= now; return how many."""
        plan = self.plan_expiry(now_ms)
        self.apply(plan, now_ms=now_ms)
        return plan.records

    def release_member(self, member_id: str, now_ms: int) -> int:
        """Release every record `member_id` holds (it left or timed out); return how many."""
        plan = self.plan_member_release(member_id)
        self.apply(plan, now_ms=now_ms)
        return plan.records

    # ------------------------------------------------------------------ the log start moves

    def plan_log_start(self, log_start: int) -> StartPlan:
        """The window once every record below `log_start` is archived and SPSO is at least
        `log_start` (KIP-932: the log start moved past SPSO). Nothing changes yet; at or
        below SPSO the window stays as it is."""
        ranges = [r for r in self.state_ranges() if r.last_offset >= log_start]
        if ranges and ranges[0].first_offset < log_start:
            r = ranges[0]
            ranges[0] = StateRange(log_start, r.last_offset, r.state, r.delivery_count)
        k = 0
        while k < len(ranges) and ranges[k].state.is_terminal:
            k += 1
        end = max(self.speo, log_start)
        start = ranges[k].first_offset if k < len(ranges) else end
        return StartPlan(
            log_start, max(start, self.spso), end, tuple(ranges[k:]), self._open_below(log_start)
        )

    def _open_below(self, offset: int) -> int:
        """Records of the window below `offset` not yet ACKNOWLEDGED or ARCHIVED."""
        last = min(offset, self.speo) - 1
        if last < self.spso:
            return 0
        i, j = self._ranges.overlapping(self.spso, last)
        return sum(
            min(b.last, last) - b.first + 1
            for b in self._ranges.view(i, j)
            if not b.state.is_terminal
        )

    def apply_log_start(self, plan: StartPlan) -> None:
        """Apply a `plan_log_start` plan, made with no change in between, once it is durable."""
        cut = min(plan.log_start, self.speo)
        if cut > self.spso:
            i, j = self._ranges.isolate(self.spso, cut - 1)
            for b in self._ranges.view(i, j):
                if not b.state.is_terminal:
                    self._move(b, ARCHIVED)
            self._ranges.merge(i, j)
        self._advance_spso()
        if self.speo < plan.log_start:  # nothing left in flight: the window starts afresh
            self._ranges.clear(plan.log_start)

    # ----------------------------------------------------------------- reset and recovery

    def reset(self, start_offset: int) -> None:
        """Drop all in-flight state and start the window at `start_offset` (admin reset of an
        empty group). Pending changes are dropped: the caller must write a new checkpoint."""
        self._ranges.clear(start_offset)
        self._locks.clear()
        self._available = 0
        self._changes.clear()

    def restore(self, spso: int, speo: int, ranges: Sequence[StateRange]) -> None:
        """Rebuild the window from durable state (a checkpoint and its deltas, applied).

        Offsets of [spso, speo) that no range covers are AVAILABLE with delivery count 0: at
        most a first delivery was under way there, and that is what its durable form says.
        Ranges below `spso` are ignored (SPSO moved past them); a range past `speo` moves
        SPEO up to it, as a SHARE_DELTA moves the recorded end in seed 000. Overlapping
        ranges and ACQUIRED (never durable) are a ValueError.
        """
        if speo < spso:
            raise ValueError(f"SPEO {speo} is below SPSO {spso}")
        self.reset(spso)
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
            self._ranges.append(InFlightBatch(first, r.last_offset, r.state, r.delivery_count))
            if r.state is AVAILABLE:
                self._available += r.last_offset - first + 1
            self._ranges.merge_tail()
            cursor = r.last_offset + 1
        if cursor < speo:
            self._append_available(cursor, speo - 1)
            self._ranges.merge_tail()
        self._advance_spso()

    # ------------------------------------------------------------------------ transitions

    def _move(
        self,
        b: InFlightBatch,
        new: RecordState,
        member_id: str | None = None,
        deadline: int | None = None,
    ) -> None:
        """The one place a range changes state, owner or deadline; keeps the counters right.

        ACQUIRED -> ACQUIRED is a RENEW (new deadline, same count), not a state transition.
        """
        if b.state is ACQUIRED and b.deadline is not None:
            self._locks.remove(b.deadline, b.size)
        renew = new is ACQUIRED and b.state is ACQUIRED
        if not renew:
            b.state.validate_transition(new)
            if new is ACQUIRED:
                b.delivery_count += 1
            self._available += b.size * ((new is AVAILABLE) - (b.state is AVAILABLE))
        if new is ACQUIRED and deadline is not None:
            self._locks.add(deadline, b.first, b.last)
        b.state, b.member_id, b.deadline = new, member_id, deadline

    def _finish(self, b: InFlightBatch, new: RecordState) -> None:
        """End a delivery attempt and record the durable change."""
        self._move(b, new)
        self._changes.append(StateRange(b.first, b.last, new, b.delivery_count))

    def _advance_spso(self) -> None:
        self._ranges.drop_leading_terminal()


# ------------------------------------------------------------------------------- helpers


def _ack_target(
    b: InFlightBatch, ack: AcknowledgeType, member_id: str | None, delivery_count_limit: int
) -> RecordState | None:
    """Where an acknowledgement moves range `b` (ACQUIRED, checked by the planner), or None
    when its durable state stays: RENEW, and a GAP over records this member does not hold."""
    if ack is AcknowledgeType.ACCEPT:
        return ACKNOWLEDGED
    if ack is AcknowledgeType.REJECT:
        return ARCHIVED
    if ack is AcknowledgeType.RELEASE:
        # The limit is checked when an attempt ends, not when it starts (KIP: a lowered limit
        # may let a final attempt run past it; a raised one gives archived-to-be records more
        # tries). Lock expiry and a member's departure are RELEASEs too.
        return ARCHIVED if b.delivery_count >= delivery_count_limit else AVAILABLE
    if ack is AcknowledgeType.GAP and b.state is ACQUIRED and b.member_id == member_id:
        return ARCHIVED
    return None


_MOVED_BY = {
    AcknowledgeType.ACCEPT: Moved.ACCEPTED,
    AcknowledgeType.REJECT: Moved.REJECTED,
    AcknowledgeType.GAP: Moved.GAP,
    AcknowledgeType.RENEW: Moved.RENEWED,
}


def _why(ack: AcknowledgeType, target: RecordState | None) -> Moved | None:
    """Why an acknowledgement moves a range to `target` (see `_ack_target`); None: it stays."""
    if ack is AcknowledgeType.RELEASE:
        return Moved.DELIVERY_LIMIT if target is ARCHIVED else Moved.RELEASED
    if target is None and ack is not AcknowledgeType.RENEW:
        return None  # a GAP over records this member does not hold
    return _MOVED_BY[ack]


def _durable(b: InFlightBatch) -> StateRange:
    if b.state is ACQUIRED:
        return StateRange(b.first, b.last, AVAILABLE, b.delivery_count - 1)
    return StateRange(b.first, b.last, b.state, b.delivery_count)


def _append_merged(out: list[StateRange], r: StateRange) -> None:
    if out:
        p = out[-1]
        if (
            p.last_offset + 1 == r.first_offset
            and p.state is r.state
            and p.delivery_count == r.delivery_count
        ):
            out[-1] = StateRange(p.first_offset, r.last_offset, p.state, p.delivery_count)
            return
    out.append(r)


def _normalise(changes: list[StateRange]) -> list[StateRange]:
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
                kept.append(
                    StateRange(p.first_offset, c.first_offset - 1, p.state, p.delivery_count)
                )
            if p.last_offset > c.last_offset:
                kept.append(StateRange(c.last_offset + 1, p.last_offset, p.state, p.delivery_count))
        kept.append(c)
        painted = sorted(kept, key=lambda r: r.first_offset)
    out: list[StateRange] = []
    for r in painted:
        _append_merged(out, r)
    return out


def _emit(out: list[AcquiredRecords], first: int, last: int, count: int) -> None:
    if out and out[-1].last_offset + 1 == first and out[-1].delivery_count == count:
        out[-1] = AcquiredRecords(out[-1].first_offset, last, count)
    else:
        out.append(AcquiredRecords(first, last, count))


def acknowledge_nothing_held(batches: Sequence[AckBatch]) -> ErrorCode:
    """What an acknowledgement answers where the member holds no record: a malformed request
    is INVALID_REQUEST, GAPs alone change nothing, anything else is INVALID_RECORD_STATE."""
    runs = _parse_acks(batches)
    if isinstance(runs, ErrorCode):
        return runs
    if all(ack is AcknowledgeType.GAP for _, _, ack in runs):
        return ErrorCode.none
    return ErrorCode.invalid_record_state


def _parse_acks(batches: Sequence[AckBatch]) -> list[tuple[int, int, AcknowledgeType]] | ErrorCode:
    """Check the request's shape and cut it into runs of one type each."""
    runs: list[tuple[int, int, AcknowledgeType]] = []
    prev_last: int | None = None
    for first, last, types in batches:
        if first > last or (prev_last is not None and first <= prev_last):
            return ErrorCode.invalid_request
        if not types or not _ACK_TYPES.issuperset(types):
            return ErrorCode.invalid_request
        if len(types) == 1:
            runs.append((first, last, AcknowledgeType(types[0])))
        elif len(types) == last - first + 1:
            # One type per offset: equal neighbours become one run, handled as a range.
            offset = first
            for ack, group in groupby(types):
                n = sum(1 for _ in group)
                runs.append((offset, offset + n - 1, AcknowledgeType(ack)))
                offset += n
        else:
            return ErrorCode.invalid_request
        prev_last = last
    return runs
