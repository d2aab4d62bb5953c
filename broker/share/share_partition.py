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
from collections.abc import Iterable
from collections.abc import Iterator
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
ARCHIVING = RecordState.ARCHIVING
ARCHIVED = RecordState.ARCHIVED

_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_ACK_TYPE = {int(t): t for t in AcknowledgeType}

AckBatch = tuple[int, int, Sequence[int]]
"""(first offset, last offset, acknowledge types): one type for the range, or one per offset."""

Run = tuple[int, int, AcknowledgeType]
"""(first offset, last offset, type): offsets acknowledged alike, the unit a plan works in."""

SharePartitionKey = tuple[str, uuid.UUID, int]
"""(group id, topic id, partition)."""

KeyHashes = Mapping[int, int | None]
"""offset -> 32-bit hash of the record's key (None: a null key), for key-ordered groups. An
offset the mapping lacks holds no record (a compacted gap): it is handed out unordered."""

# A member that has not fetched a key-ordered share-partition for this long no longer owns a
# hash range there, so its keys go to the members still fetching.
AFFINITY_IDLE_MS = 5_000


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The effective group limits, read afresh at every operation (group configs change)."""

    delivery_count_limit: int
    max_record_locks: int
    lock_duration_ms: int
    renew_enabled: bool
    # share.acquire.mode=record_limit (KIP-1206): a fetch acquires at most MaxRecords records,
    # and the acquired range may end inside a stored batch.
    record_limit: bool = False
    # share.key.ordering.enable: records of one key are never in flight at two members.
    key_ordering: bool = False
    # KIP-1191: the group names a dead-letter topic, so REJECT and the delivery-count limit
    # lead to ARCHIVING (copied, then ARCHIVED) rather than straight to ARCHIVED.
    dead_letter: bool = False


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
    """Records a plan moves, by why; what `apply` returns. `at_limit`: the offset ranges
    given up at the delivery-count limit (Moved.DELIVERY_LIMIT), merged and in offset order,
    so the log line that reports them can name them (a few ranges: one per run touched)."""

    moved: Mapping[Moved, int] = field(default_factory=dict, hash=False)
    at_limit: tuple[tuple[int, int], ...] = ()

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
    dead_letter: bool = False

    @property
    def records(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.runs)


@dataclass(slots=True)
class PlanDraft:
    """A plan made a slice of runs at a time (`SharePartition.plan_more`), so that a request
    acknowledging thousands of runs never plans them all in one step. Nothing changes until
    the finished `plan()` is written and applied."""

    member_id: str | None
    limits: ShareLimits
    runs: list[Run] = field(default_factory=list)
    changes: list[StateRange] = field(default_factory=list)
    moved: Counter[Moved] = field(default_factory=Counter)
    at_limit: list[tuple[int, int]] = field(default_factory=list)
    in_order: bool = True  # changes came sorted and disjoint (they do: runs are)

    def add_change(self, change: StateRange) -> None:
        if self.changes and change.first_offset <= self.changes[-1].last_offset:
            self.in_order = False
            self.changes.append(change)
        else:
            _append_merged(self.changes, change)

    def plan(self) -> Plan:
        changes = self.changes if self.in_order else _normalise(self.changes)
        return Plan(
            self.member_id,
            tuple(self.runs),
            self.limits.delivery_count_limit,
            self.limits.lock_duration_ms,
            tuple(changes),
            Outcome(dict(self.moved), _merged(self.at_limit)),
            self.limits.dead_letter,
        )


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
        self._archiving = 0  # records ARCHIVING: open until their dead-letter copy is made
        # Why records went ARCHIVING in this run, (first, last, REJECTed?): the reason header of
        # their copies. Not durable: after a restart the reason is inferred from the count.
        self._given_up: list[tuple[int, int, bool]] = []
        self._changes: list[StateRange] = []
        # Key-ordered groups only (empty otherwise): the key hash of every record acquired under
        # the key rule, by offset and by key (at most one acquired record per key), and when
        # each member last fetched, for the hash-range affinity.
        self._key_at: dict[int, int] = {}
        self._held: dict[int, int] = {}
        self._fetched_at: dict[str, int] = {}
        # Key hashes of offsets [_keys_from, _keys_from + len(_keys)) of the window, so a fetch
        # decodes only batches it has not seen (the window is scanned again at every fetch).
        self._keys: list[int | None] = []
        self._keys_from = start_offset

    # ----------------------------------------------------------------------------- queries

    def limits(self) -> ShareLimits:
        """The group's limits in force now."""
        return self._limits()

    @property
    def key(self) -> SharePartitionKey:
        return (self.group_id, self.topic_id, self.partition)

    @property
    def spso(self) -> int:
        return self._ranges.start

    @property
    def speo(self) -> int:
        return self._ranges.end

    @property
    def key_ordering(self) -> bool:
        """Whether the group orders records by key (the broker then reads keys for it)."""
        return self._limits().key_ordering

    def in_flight_count(self) -> int:
        return self.speo - self.spso

    def holds_back_fetchers(self) -> bool:
        """Whether a fetch may now find records in the log past SPEO and still acquire none:
        the window is at its record-lock limit, or the group orders by key (a record waits
        while its key is held). Otherwise an append's notification is all a waiter needs."""
        limits = self._limits()
        return self.speo - self.spso >= limits.max_record_locks or limits.key_ordering

    def acquired_count(self) -> int:
        return self._locks.records

    def open_records(self) -> int:
        """Records of the window not yet ACKNOWLEDGED or ARCHIVED."""
        return self._available + self._locks.records + self._archiving

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
        self,
        member_id: str,
        spans: Sequence[BatchSpan],
        *,
        max_records: int,
        now_ms: int,
        keys: KeyHashes | None = None,
        record_limit: bool = False,
    ) -> list[AcquiredRecords]:
        """Acquire records for `member_id` from the log batches `spans`.

        `spans` start at the batch holding `next_fetch_offset()` and run in log order. First
        the AVAILABLE in-flight records they hold, then new records at and after SPEO while
        the window stays within `max_record_locks` (the first new batch is allowed whenever
        the window has room for one record). In batch_optimized mode whole batches are taken
        (MaxRecords may be exceeded to keep batch boundaries); in record_limit mode no more
        than `max_records` are, and the last range may end inside a batch. Control batches and
        offsets missing from the log (gaps before or between spans) are archived, never
        handed out.

        `record_limit` asks for record_limit mode whatever the group says (ShareFetch v2's
        ShareAcquireMode, KIP-1206). With `keys` (a key-ordered group: the key of every
        record the spans hold), the key rule decides record by record (`_acquire_keyed`).
        """
        cursor = self.next_fetch_offset()
        if cursor is None or max_records <= 0:
            return []
        limits = self._limits()
        if keys is not None:
            return self._acquire_keyed(member_id, spans, keys, cursor, max_records, now_ms)
        strict = limits.record_limit or record_limit
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
            budget = max_records - taken if strict else None
            if span.last_offset >= self.speo:
                reach = span.last_offset
                if budget is not None:  # at most this far, however the budget is spent
                    reach = min(reach, max(lo, self.speo) + budget - 1)
                if not self._may_extend(reach, added_new, limits.max_record_locks):
                    break
                added_new = True
            taken += self._acquire_span(member_id, lo, span.last_offset, deadline, out, budget)
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
        self,
        member_id: str,
        lo: int,
        hi: int,
        deadline: int,
        out: list[AcquiredRecords],
        budget: int | None = None,
    ) -> int:
        """Acquire what is AVAILABLE in [lo, hi], at most `budget` records (None: all)."""
        taken = 0
        lo = max(lo, self.spso)  # archiving a gap just before may have moved SPSO past lo
        in_flight_hi = min(hi, self.speo - 1)
        if lo <= in_flight_hi and self._available:
            i, j = self._ranges.overlapping(lo, in_flight_hi)
            if any(b.state is AVAILABLE for b in self._ranges.view(i, j)):
                if budget is not None:
                    in_flight_hi = self._budget_end(i, j, lo, in_flight_hi, budget)
                i, j = self._ranges.isolate(lo, in_flight_hi)
                for b in self._ranges.view(i, j):
                    if b.state is AVAILABLE:
                        self._move(b, ACQUIRED, member_id, deadline)
                        _emit(out, b.first, b.last, b.delivery_count)
                        taken += b.size
                self._ranges.merge(i, j)
        if budget is not None:
            if taken >= budget:
                return taken
            hi = min(hi, max(lo, self.speo) + budget - taken - 1)
        new_lo = max(lo, self.speo)
        if new_lo <= hi:
            batch = self._append_available(new_lo, hi)
            self._move(batch, ACQUIRED, member_id, deadline)
            self._ranges.merge_tail()
            _emit(out, new_lo, hi, 1)
            taken += hi - new_lo + 1
        return taken

    def _budget_end(self, i: int, j: int, lo: int, hi: int, budget: int) -> int:
        """The offset in [lo, hi] where the AVAILABLE records of ranges [i, j) reach
        `budget`, or `hi` if they never do: one step per range, not per record."""
        for b in self._ranges.view(i, j):
            if b.state is not AVAILABLE:
                continue
            first, last = max(b.first, lo), min(b.last, hi)
            if last - first + 1 >= budget:
                return first + budget - 1
            budget -= last - first + 1
        return hi

    def _acquire_keyed(
        self,
        member_id: str,
        spans: Sequence[BatchSpan],
        keys: KeyHashes,
        cursor: int,
        max_records: int,
        now_ms: int,
    ) -> list[AcquiredRecords]:
        """Key-ordered acquisition (seed 001): a record with a key is acquired only if no
        record of its key is ACQUIRED, nor AVAILABLE at a lower offset, and only by the member
        whose hash range holds the key; records with a null key go to anyone. At most
        `max_records`, batch boundaries or not.

        The spans first join the window whole (AVAILABLE, within `max_record_locks`); then
        the window is scanned from `cursor`, its first AVAILABLE offset, in offset order, so
        every AVAILABLE record below the one considered has been seen: a key seen and not
        taken blocks the rest of its records for this fetch. `keys` holds the keys from
        `keys_wanted()`'s low end on, and the spans go no further than its high end; the keys
        are remembered for the window (one entry per offset), so each batch is decoded once.
        """
        limits = self._limits()
        self._fetched_at[member_id] = now_ms
        start = cursor
        end = self._join_spans(spans, cursor, limits.max_record_locks)
        self._remember_keys(keys, start, end)
        start = max(start, self.spso)
        if start >= end or not self._available:
            return []
        picked = self._pick(member_id, start, end, self._owners(now_ms), max_records)
        return self._take(member_id, picked, now_ms + limits.lock_duration_ms)

    def keys_wanted(self) -> tuple[int, int]:
        """For the next key-ordered fetch: the keys it needs from `lo` on (the start of the
        fetch, or past the keys remembered if they reach it), and the spans it may take,
        those starting below `hi` (where the window may grow to). The first span always does.
        """
        start = self.next_fetch_offset()
        if start is None:
            return (0, 0)
        known_end = self._keys_from + len(self._keys)
        lo = known_end if self._keys_from <= start <= known_end else start
        return (lo, max(self.spso + self._limits().max_record_locks, self.speo))

    def _remember_keys(self, keys: KeyHashes, start: int, end: int) -> None:
        """Add the keys of [known end, end) from `keys` (what `keys_wanted` asked for);
        forget those below SPSO. One entry per offset of the window, no more."""
        known_end = self._keys_from + len(self._keys)
        if not self._keys_from <= start <= known_end:
            self._keys, self._keys_from, known_end = [], start, start
        below = min(self.spso, start) - self._keys_from
        if below > 0:
            del self._keys[:below]
            self._keys_from += below
        self._keys.extend(keys.get(o) for o in range(known_end, end))

    def _join_spans(self, spans: Sequence[BatchSpan], cursor: int, max_locks: int) -> int:
        """Bring the spans into the window (gaps and control batches archived, new data
        AVAILABLE, within `max_locks`); the end of the offsets whose keys they give."""
        end = cursor
        added_new = False
        for span in spans:
            cursor = max(cursor, self.spso)
            if span.last_offset < cursor:
                continue
            lo = max(span.base_offset, cursor)
            self._archive_absent(cursor, lo - 1)
            cursor = span.last_offset + 1
            if span.is_control:
                self._archive_absent(lo, span.last_offset)
                continue
            if span.last_offset >= self.speo:
                if not self._may_extend(span.last_offset, added_new, max_locks):
                    break
                added_new = True
                self._append_available(max(lo, self.speo), span.last_offset)
                self._ranges.merge_tail()
            end = cursor
        return end

    def _pick(
        self,
        member_id: str,
        start: int,
        end: int,
        owners: list[str],
        max_records: int,
    ) -> list[tuple[int, int | None]]:
        """The AVAILABLE offsets of [start, end) the key rule gives `member_id`, in order."""
        blocked = set(self._held)
        keys, base = self._keys, self._keys_from
        picked: list[tuple[int, int | None]] = []
        i, j = self._ranges.overlapping(start, end - 1)
        for b in self._ranges.view(i, j):
            if b.state is not AVAILABLE:
                continue
            for offset in range(max(b.first, start), min(b.last + 1, end)):
                key = keys[offset - base]
                if key is not None:
                    if key in blocked:
                        continue
                    blocked.add(key)  # its later records wait for this one
                    if owners[(key * len(owners)) >> 32] != member_id:
                        continue
                picked.append((offset, key))
                if len(picked) >= max_records:
                    return picked
        return picked

    def _owners(self, now_ms: int) -> list[str]:
        """Members that fetched lately, sorted: member n owns the n-th slice of the hash
        space (seed 001's hash ranges), so a key stays with one member while the set holds."""
        for member, at in list(self._fetched_at.items()):
            if now_ms - at > AFFINITY_IDLE_MS:
                del self._fetched_at[member]
        return sorted(self._fetched_at)

    def forget_member(self, member_id: str) -> None:
        """The member left the group: its hash range goes to the others at once."""
        self._fetched_at.pop(member_id, None)

    def _take(
        self, member_id: str, picked: list[tuple[int, int | None]], deadline: int
    ) -> list[AcquiredRecords]:
        """Acquire the picked AVAILABLE offsets (sorted), run by run."""
        out: list[AcquiredRecords] = []
        runs: list[list[int]] = []
        for offset, _ in picked:
            if runs and runs[-1][1] + 1 == offset:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset])
        for first, last in runs:
            i, j = self._ranges.isolate(first, last)
            for b in self._ranges.view(i, j):
                self._move(b, ACQUIRED, member_id, deadline)
                _emit(out, b.first, b.last, b.delivery_count)
            self._ranges.merge(i, j)
        for offset, key in picked:
            if key is not None:
                self._key_at[offset] = key
                self._held[key] = offset
        return out

    def _unhold(self, first: int, last: int) -> None:
        """Records [first, last] left ACQUIRED: their keys may be acquired again."""
        if last - first + 1 <= len(self._key_at):
            gone = [o for o in range(first, last + 1) if o in self._key_at]
        else:
            gone = [o for o in self._key_at if first <= o <= last]
        for offset in gone:
            key = self._key_at.pop(offset)
            if self._held.get(key) == offset:
                del self._held[key]

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

    def pass_non_data(self, first: int, last: int) -> None:
        """The log holds no data record at [first, last] (a control or an empty batch):
        archived if available, as a fetch's read archives it. Recovery does not record
        these, so a recovered window learns them from the log's ranges instead."""
        self._archive_absent(first, last)

    def pass_own_record(self, offset: int) -> bool:
        """The one-record control batch this share-partition's state was just written as, at
        `offset`: when the window is empty and ends there, SPSO and SPEO move past it now, as
        the next fetch's read would move them (control offsets are never delivered; recovery
        passes it the same way). A consumer at the log end that acknowledges all it holds then
        does not read the log, nor wake fetchers, once per acknowledgement for nothing."""
        if not offset == self.spso == self.speo:
            return False
        self._archive_absent(offset, offset)
        return True

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
        draft = self.draft(member_id)
        refused = self.plan_more(draft, runs)
        return refused if refused is not None else draft.plan()

    def draft(self, member_id: str | None) -> PlanDraft:
        """An empty plan for `member_id`'s acknowledgement, under the limits in force now."""
        return PlanDraft(member_id, self._limits())

    def plan_more(self, draft: PlanDraft, runs: Sequence[Run]) -> ErrorCode | None:
        """Check the next runs of an acknowledgement (sorted, disjoint, after the draft's) and
        add what they change to `draft`; or the error that refuses the whole request (see
        `plan_acknowledge`). Nothing changes: a draft planned over several steps stays right
        as long as nothing else moves the member's records in between (the manager sees to
        it: `SharePartitionManager.begin_acknowledge`)."""
        member_id, limits = draft.member_id, draft.limits
        assert member_id is not None, "an acknowledgement has a member"
        for first, last, ack in runs:
            if ack is AcknowledgeType.GAP:
                continue
            if ack is AcknowledgeType.RENEW and not limits.renew_enabled:
                return ErrorCode.invalid_record_state
            if not self._held_by(member_id, first, last):
                return ErrorCode.invalid_record_state
        self._plan_into(draft, runs)
        return None

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
        draft = PlanDraft(member_id, limits)
        self._plan_into(draft, runs)
        return draft.plan()

    def _plan_into(self, draft: PlanDraft, runs: Sequence[Run]) -> None:
        """Add to `draft` the durable ranges `runs` will produce, and why each record moves,
        read off the current ranges (no change)."""
        member_id, limits = draft.member_id, draft.limits
        count_limit, dead_letter = limits.delivery_count_limit, limits.dead_letter
        moved = draft.moved
        for first, last, ack in runs:
            first, last = max(first, self.spso), min(last, self.speo - 1)
            if first > last:  # only a GAP run can lie outside the window
                continue
            i, j = self._ranges.overlapping(first, last)
            for b in self._ranges.view(i, j):
                lo, hi = max(b.first, first), min(b.last, last)
                target = _ack_target(b, ack, member_id, count_limit, dead_letter)
                why = _why(ack, target)
                if why is not None:
                    moved[why] += hi - lo + 1
                    if why is Moved.DELIVERY_LIMIT:
                        draft.at_limit.append((lo, hi))
                if target is not None:
                    draft.add_change(StateRange(lo, hi, target, b.delivery_count))
        draft.runs.extend(runs)

    def apply(self, plan: Plan, *, now_ms: int) -> Outcome:
        """Apply a plan made by one of the `plan_*` methods, with no change in between; what
        moved and why."""
        for first, last, ack in plan.runs:
            self._apply_ack(plan, first, last, ack, now_ms)
        self._advance_spso()
        return plan.outcome

    def apply_runs(self, plan: Plan, start: int, stop: int, *, now_ms: int) -> None:
        """Apply `plan.runs[start:stop]`: a plan applied over several steps, in order, ended
        by `settle`. In between, nothing may change the records the plan covers (a fetch,
        which takes only AVAILABLE and new records, may), and SPSO has moved over what the
        slices so far finished, so such a fetch sees the window as it is."""
        for first, last, ack in plan.runs[start:stop]:
            self._apply_ack(plan, first, last, ack, now_ms)
        self._advance_spso()

    def settle(self, plan: Plan) -> Outcome:
        """The last step of applying a plan: what it moved, and why."""
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
            target = _ack_target(
                b, ack, plan.member_id, plan.delivery_count_limit, plan.dead_letter
            )
            if target is not None:
                self._finish(b, target)
                if target is ARCHIVING:
                    self._given_up.append((b.first, b.last, ack is AcknowledgeType.REJECT))
        self._ranges.merge(i, j)

    # ------------------------------------------------------------- dead letters (KIP-1191)

    def dead_letter_count(self) -> int:
        """Records ARCHIVING: given up on, waiting for their copy to the dead-letter topic."""
        return self._archiving

    def dead_letters(self, max_records: int) -> list[StateRange]:
        """The ARCHIVING ranges from SPSO on, in offset order, cut at about `max_records`."""
        out: list[StateRange] = []
        left = max_records if self._archiving else 0
        for b in self._ranges:
            if left <= 0:
                break
            if b.state is ARCHIVING:
                last = min(b.last, b.first + left - 1)
                out.append(StateRange(b.first, last, ARCHIVING, b.delivery_count))
                left -= last - b.first + 1
        return out

    def dead_letter_reasons(self, run: StateRange) -> list[tuple[int, int, bool | None]]:
        """`run` cut by why its records were given up: (first, last, True) REJECTed, False
        released at the delivery-count limit, None not known (given up before a restart)."""
        out: list[tuple[int, int, bool | None]] = []
        cursor = run.first_offset
        for first, last, rejected in sorted(self._given_up):
            lo, hi = max(first, cursor), min(last, run.last_offset)
            if lo > hi:
                continue
            if lo > cursor:
                out.append((cursor, lo - 1, None))
            out.append((lo, hi, rejected))
            cursor = hi + 1
        if cursor <= run.last_offset:
            out.append((cursor, run.last_offset, None))
        return out

    def plan_archive(self, runs: Sequence[StateRange]) -> list[StateRange]:
        """The durable change that ends ARCHIVING over `runs` (copied, or with no usable
        dead-letter topic): the parts still ARCHIVING, as ARCHIVED. Nothing changes yet."""
        changes: list[StateRange] = []
        for r in runs:
            first, last = max(r.first_offset, self.spso), min(r.last_offset, self.speo - 1)
            if first > last:
                continue
            i, j = self._ranges.overlapping(first, last)
            for b in self._ranges.view(i, j):
                if b.state is ARCHIVING:
                    lo, hi = max(b.first, first), min(b.last, last)
                    changes.append(StateRange(lo, hi, ARCHIVED, b.delivery_count))
        return _normalise(changes)

    def apply_archive(self, changes: Sequence[StateRange]) -> int:
        """Apply a `plan_archive` change once it is durable; how many records it archived."""
        archived = 0
        for c in changes:
            first, last = max(c.first_offset, self.spso), min(c.last_offset, self.speo - 1)
            if first > last:
                continue
            i, j = self._ranges.isolate(first, last)
            for b in self._ranges.view(i, j):
                if b.state is ARCHIVING:
                    self._finish(b, ARCHIVED)
                    archived += b.size
            self._ranges.merge(i, j)
        self._advance_spso()
        # Disjoint ranges of the window: bounded by it once those below SPSO are dropped.
        self._given_up = [g for g in self._given_up if self._archiving and g[1] >= self.spso]
        return archived

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
        self._archiving = 0
        self._given_up.clear()
        self._changes.clear()
        self._key_at.clear()
        self._held.clear()
        self._keys, self._keys_from = [], start_offset

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
            if r.state is ARCHIVING:
                self._archiving += r.last_offset - first + 1
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
        if b.state is ACQUIRED and not renew and self._key_at:
            self._unhold(b.first, b.last)
        if not renew:
            b.state.validate_transition(new)
            if new is ACQUIRED:
                b.delivery_count += 1
            self._available += b.size * ((new is AVAILABLE) - (b.state is AVAILABLE))
            self._archiving += b.size * ((new is ARCHIVING) - (b.state is ARCHIVING))
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
    b: InFlightBatch,
    ack: AcknowledgeType,
    member_id: str | None,
    delivery_count_limit: int,
    dead_letter: bool,
) -> RecordState | None:
    """Where an acknowledgement moves range `b` (ACQUIRED, checked by the planner), or None
    when its durable state stays: RENEW, and a GAP over records this member does not hold.
    With a dead-letter topic, a record given up on goes to ARCHIVING first (KIP-1191)."""
    given_up = ARCHIVING if dead_letter else ARCHIVED
    if ack is AcknowledgeType.ACCEPT:
        return ACKNOWLEDGED
    if ack is AcknowledgeType.REJECT:
        return given_up
    if ack is AcknowledgeType.RELEASE:
        # The limit is checked when an attempt ends, not when it starts (KIP: a lowered limit
        # may let a final attempt run past it; a raised one gives archived-to-be records more
        # tries). Lock expiry and a member's departure are RELEASEs too.
        return given_up if b.delivery_count >= delivery_count_limit else AVAILABLE
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
        return Moved.RELEASED if target is AVAILABLE else Moved.DELIVERY_LIMIT
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


def _merged(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Offset ranges sorted, with touching or overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return tuple(out)


def _emit(out: list[AcquiredRecords], first: int, last: int, count: int) -> None:
    if out and out[-1].last_offset + 1 == first and out[-1].delivery_count == count:
        out[-1] = AcquiredRecords(out[-1].first_offset, last, count)
    else:
        out.append(AcquiredRecords(first, last, count))


class MalformedAcks(ValueError):
    """Acknowledgement batches Kafka refuses whole, before looking at any record:
    INVALID_REQUEST."""


def ack_runs(batches: Iterable[AckBatch]) -> Iterator[Run]:
    """The request's batches cut into runs of one type each, checked as they are cut (a
    generator: a request of thousands of runs is cut a slice at a time).

    :raises MalformedAcks: first > last, unsorted or overlapping batches, an unknown type,
        or a types list that is neither one type nor one per offset.
    """
    prev_last: int | None = None
    for first, last, types in batches:
        if first > last or (prev_last is not None and first <= prev_last):
            raise MalformedAcks(f"batch {first}-{last} out of order")
        if not types or not _ACK_TYPES.issuperset(types):
            raise MalformedAcks(f"batch {first}-{last}: bad acknowledge types")
        if len(types) == 1:
            yield (first, last, _ACK_TYPE[types[0]])
        elif len(types) == last - first + 1:
            # One type per offset: equal neighbours become one run, handled as a range.
            offset = first
            for ack, group in groupby(types):
                n = sum(1 for _ in group)
                yield (offset, offset + n - 1, _ACK_TYPE[ack])
                offset += n
        else:
            raise MalformedAcks(f"batch {first}-{last}: {len(types)} acknowledge types")
        prev_last = last


def _parse_acks(batches: Sequence[AckBatch]) -> list[Run] | ErrorCode:
    """Check the request's shape and cut it into runs of one type each."""
    try:
        return list(ack_runs(batches))
    except MalformedAcks:
        return ErrorCode.invalid_request
