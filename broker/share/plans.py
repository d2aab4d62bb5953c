"""Plans: a change to a share-partition's window computed and not yet applied (two-phase).

Every change that must survive a restart is planned against the window as it is (nothing
changes), its durable ranges (`Plan.changes`) are written, and only then is it applied
(`SharePartition.apply`). This module reads the window and never changes it: what an
acknowledgement, a lock expiry or a departure moves and why (`plan_into`), what a dead-letter
pass archives (`plan_archive`), and the window once the log start moves up (`plan_log_start`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from enum import Enum

from broker.share.ack_runs import Run
from broker.share.acquire.not_before import NO_BACKOFF
from broker.share.acquire.not_before import Backoff
from broker.share.in_flight import InFlightBatch
from broker.share.limits import ShareLimits
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.window import ShareWindow
from broker.share.window import StateRange
from broker.share.window import append_merged
from broker.share.window import normalise

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVING = RecordState.ARCHIVING
ARCHIVED = RecordState.ARCHIVED


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
    # Retry backoff: a record released back to AVAILABLE waits until
    # `backoff.not_before(its delivery count, now_ms)`, in the durable change and in memory.
    backoff: Backoff = NO_BACKOFF
    now_ms: int = 0

    def wait_of(self, b: InFlightBatch) -> int:
        """Until when range `b`, released back to AVAILABLE by this plan, waits (0: no wait)."""
        return self.backoff.not_before(b.delivery_count, self.now_ms)

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
    now_ms: int = 0  # when released records start their backoff

    def add_change(self, change: StateRange) -> None:
        if self.changes and change.first_offset <= self.changes[-1].last_offset:
            self.in_order = False
            self.changes.append(change)
        else:
            append_merged(self.changes, change)

    def plan(self) -> Plan:
        changes = self.changes if self.in_order else normalise(self.changes)
        return Plan(
            self.member_id,
            tuple(self.runs),
            self.limits.delivery_count_limit,
            self.limits.lock_duration_ms,
            tuple(changes),
            Outcome(dict(self.moved), merged(self.at_limit)),
            self.limits.dead_letter,
            self.limits.backoff,
            self.now_ms,
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


# ------------------------------------------------------------------------- planning


def plan_into(window: ShareWindow, draft: PlanDraft, runs: Sequence[Run]) -> None:
    """Add to `draft` the durable ranges `runs` will produce, and why each record moves,
    read off the window (no change)."""
    member_id, limits = draft.member_id, draft.limits
    count_limit, dead_letter = limits.delivery_count_limit, limits.dead_letter
    moved = draft.moved
    backoff, now_ms = limits.backoff, draft.now_ms
    start, end = window.start, window.end  # planning changes nothing
    for first, last, ack in runs:
        first, last = max(first, start), min(last, end - 1)
        if first > last:  # only a GAP run can lie outside the window
            continue
        for b in window.ranges_in(first, last):
            lo, hi = max(b.first, first), min(b.last, last)
            target = ack_target(b, ack, member_id, count_limit, dead_letter)
            why = _why(ack, target)
            if why is not None:
                moved[why] += hi - lo + 1
                if why is Moved.DELIVERY_LIMIT:
                    draft.at_limit.append((lo, hi))
            if target is not None:
                wait = backoff.not_before(b.delivery_count, now_ms) if target is AVAILABLE else 0
                draft.add_change(StateRange(lo, hi, target, b.delivery_count, wait))
    draft.runs.extend(runs)


def held_by(window: ShareWindow, member_id: str, first: int, last: int) -> bool:
    """Whether every record of [first, last] is ACQUIRED by `member_id`."""
    if first < window.start or last >= window.end:
        return False
    return all(
        b.state is ACQUIRED and b.member_id == member_id for b in window.ranges_in(first, last)
    )


def holders(window: ShareWindow, runs: Sequence[Run]) -> list[str]:
    """The members holding acquired records in `runs` (in the window)."""
    members: dict[str, None] = {}
    for first, last, _ in runs:
        for b in window.ranges_in(first, last):
            if b.state is ACQUIRED and b.member_id is not None:
                members[b.member_id] = None
    return list(members)


def due_runs(window: ShareWindow, now_ms: int) -> list[Run]:
    """RELEASE runs over every ACQUIRED range whose lock deadline is <= now."""
    runs: list[Run] = []
    for lo, hi in window.due_hulls(now_ms):
        lo, hi = max(lo, window.start), min(hi, window.end - 1)
        if lo > hi:
            continue
        for b in window.ranges_in(lo, hi):
            if b.state is ACQUIRED and b.deadline is not None and b.deadline <= now_ms:
                runs.append((b.first, b.last, AcknowledgeType.RELEASE))
    return runs


def member_runs(window: ShareWindow, member_id: str) -> list[Run]:
    """RELEASE runs over every range `member_id` holds."""
    return [
        (b.first, b.last, AcknowledgeType.RELEASE)
        for b in window
        if b.state is ACQUIRED and b.member_id == member_id
    ]


def plan_log_start(window: ShareWindow, log_start: int) -> StartPlan:
    """The window once every record below `log_start` is archived and SPSO is at least
    `log_start` (KIP-932: the log start moved past SPSO). At or below SPSO the window stays."""
    ranges = [r for r in window.state_ranges() if r.last_offset >= log_start]
    if ranges and ranges[0].first_offset < log_start:
        r = ranges[0]
        ranges[0] = StateRange(log_start, r.last_offset, r.state, r.delivery_count)
    k = 0
    while k < len(ranges) and ranges[k].state.is_terminal:
        k += 1
    end = max(window.end, log_start)
    start = ranges[k].first_offset if k < len(ranges) else end
    archived = _open_below(window, log_start)
    return StartPlan(log_start, max(start, window.start), end, tuple(ranges[k:]), archived)


def _open_below(window: ShareWindow, offset: int) -> int:
    """Records of the window below `offset` not yet ACKNOWLEDGED or ARCHIVED."""
    last = min(offset, window.end) - 1
    if last < window.start:
        return 0
    return sum(
        min(b.last, last) - b.first + 1
        for b in window.ranges_in(window.start, last)
        if not b.state.is_terminal
    )


def archiving_runs(window: ShareWindow, max_records: int) -> list[StateRange]:
    """The ARCHIVING ranges from SPSO on, in offset order, cut at about `max_records`."""
    out: list[StateRange] = []
    left = max_records if window.archiving else 0
    for b in window:
        if left <= 0:
            break
        if b.state is ARCHIVING:
            last = min(b.last, b.first + left - 1)
            out.append(StateRange(b.first, last, ARCHIVING, b.delivery_count))
            left -= last - b.first + 1
    return out


def plan_archive(window: ShareWindow, runs: Sequence[StateRange]) -> list[StateRange]:
    """The durable change that ends ARCHIVING over `runs`: the parts still ARCHIVING, as
    ARCHIVED."""
    changes: list[StateRange] = []
    for r in runs:
        first, last = max(r.first_offset, window.start), min(r.last_offset, window.end - 1)
        if first > last:
            continue
        for b in window.ranges_in(first, last):
            if b.state is ARCHIVING:
                lo, hi = max(b.first, first), min(b.last, last)
                changes.append(StateRange(lo, hi, ARCHIVED, b.delivery_count))
    return normalise(changes)


# ------------------------------------------------------------------------------- helpers


def ack_target(
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
    """Why an acknowledgement moves a range to `target` (see `ack_target`); None: it stays."""
    if ack is AcknowledgeType.RELEASE:
        return Moved.RELEASED if target is AVAILABLE else Moved.DELIVERY_LIMIT
    if target is None and ack is not AcknowledgeType.RENEW:
        return None  # a GAP over records this member does not hold
    return _MOVED_BY[ack]


def merged(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Offset ranges sorted, with touching or overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return tuple(out)
