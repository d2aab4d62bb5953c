"""SharePartition against a per-offset reference model, driven by Hypothesis.

The model keeps one entry per offset and applies the rules literally, offset by offset; the
real structure keeps ranges. Any disagreement in state, count, owner, deadline, SPSO, SPEO,
acquired ranges, durable changes or error codes is a bug in the range arithmetic.

Acknowledgements, lock expiry and departures go through the two-phase path: a plan is made
(which must change nothing), its durable ranges must be exactly what applying it records, and a
plan whose write "failed" is dropped, after which the partition is as it was.

A big acknowledgement is planned and applied a slice of runs at a time (`AckJob`): planned in
slices it must be the plan made at once, and applied in slices, with a fetch between two of
them (the one change the manager lets through meanwhile), it must do what the model does when
the fetch comes between the same records.
"""

from __future__ import annotations

from itertools import groupby

from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import precondition
from hypothesis.stateful import rule
from kio.schema.errors import ErrorCode

from broker.share.ack_runs import AckBatch
from broker.share.ack_runs import ack_runs
from broker.share.persister import empties as empties_window
from broker.share.persister import window_after
from broker.share.plans import Plan
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import StateRange
from tests.hypothesis_profiles import examples
from tests.unit.test_share_partition_support import FakeLog
from tests.unit.test_share_partition_support import Limits
from tests.unit.test_share_partition_support import Rec
from tests.unit.test_share_partition_support import WindowModel
from tests.unit.test_share_partition_support import make_partition

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVING = RecordState.ARCHIVING
ARCHIVED = RecordState.ARCHIVED
MEMBERS = ("A", "B", "C")


class Model(WindowModel):
    """The reference: the rules of DESIGN.md and seed 000/002, applied per offset."""

    def __init__(self, limits: Limits, start: int) -> None:
        super().__init__(limits, start)
        self.changes: dict[int, tuple[RecordState, int]] = {}
        self.now = 0

    def acquire(
        self, member: str, spans: list[BatchSpan], max_records: int, now: int
    ) -> list[tuple[int, int]]:
        cursor = self.next_fetch_offset()
        if cursor is None or max_records <= 0:
            return []
        got: list[tuple[int, int]] = []
        added_new = False
        for span in spans:
            cursor = max(cursor, self.spso)
            if span.last_offset < cursor:
                continue
            lo = max(span.base_offset, cursor)
            self.archive_absent(cursor, lo - 1)
            cursor = span.last_offset + 1
            if span.is_control:
                self.archive_absent(lo, span.last_offset)
                continue
            strict = self.limits.current.record_limit
            if span.last_offset >= self.speo:
                reach = span.last_offset
                if strict:  # the furthest a strict budget could reach in this span
                    reach = min(reach, max(lo, self.speo) + max_records - len(got) - 1)
                if not self.may_extend(reach, added_new):
                    break
                added_new = True
            limit = max_records if strict else None
            self.acquire_span(member, lo, span.last_offset, now, got, limit)
            if len(got) >= max_records:
                break
        return got

    def may_extend(self, last: int, added_new: bool) -> bool:
        """Whether a batch reaching `last` may grow the window past SPEO."""
        locks = self.limits.current.max_record_locks
        fits = last + 1 - self.spso <= locks
        return fits or (not added_new and self.speo - self.spso < locks)

    def acquire_span(
        self,
        member: str,
        lo: int,
        last: int,
        now: int,
        got: list[tuple[int, int]],
        limit: int | None = None,
    ) -> None:
        """Acquire offset by offset; with `limit` (record_limit mode) stop once `got` has it."""
        deadline = now + self.limits.current.lock_duration_ms
        for o in range(max(lo, self.spso), last + 1):
            if limit is not None and len(got) >= limit:
                return
            if o >= self.speo:
                self.recs[o] = Rec(AVAILABLE, 0)
                self.speo = o + 1
            rec = self.recs[o]
            if rec.state is AVAILABLE:
                self.recs[o] = Rec(ACQUIRED, rec.count + 1, member, deadline)
                got.append((o, rec.count + 1))

    def end_attempt(self, o: int, state: RecordState) -> None:
        self.recs[o] = Rec(state, self.recs[o].count)
        self.changes[o] = (state, self.recs[o].count)

    def given_up(self) -> RecordState:
        """KIP-1191: with a dead-letter topic a record given up on waits for its copy."""
        return ARCHIVING if self.limits.current.dead_letter else ARCHIVED

    def release(self, o: int) -> None:
        at_limit = self.recs[o].count >= self.limits.current.delivery_count_limit
        self.end_attempt(o, self.given_up() if at_limit else AVAILABLE)

    def copy_dead_letters(self, budget: int) -> list[int]:
        """The first `budget` ARCHIVING offsets, archived (their copies were appended)."""
        offsets = [o for o in range(self.spso, self.speo) if self.recs[o].state is ARCHIVING]
        for o in offsets[:budget]:
            self.end_attempt(o, ARCHIVED)
        self.advance()
        return offsets[:budget]

    def acknowledge(self, member: str, batches: list[AckBatch], now: int) -> ErrorCode:
        types = parse_acks(batches)
        if types is None:
            return ErrorCode.invalid_request
        for o, t in types.items():
            if not self.may_acknowledge(member, o, t):
                return ErrorCode.invalid_record_state
        for o, t in types.items():
            self.apply_ack(member, o, t, now)
        self.advance()
        return ErrorCode.none

    def acknowledge_part(self, member: str, types: dict[int, int], lo: int, hi: int) -> None:
        """Part of an acknowledgement already checked: the offsets of [lo, hi], nothing else."""
        for o in range(lo, hi + 1):
            if o in types:
                self.apply_ack(member, o, AcknowledgeType(types[o]), self.now)

    def may_acknowledge(self, member: str, o: int, t: AcknowledgeType) -> bool:
        if t == AcknowledgeType.GAP:
            return True
        if t == AcknowledgeType.RENEW and not self.limits.current.renew_enabled:
            return False
        rec = self.recs.get(o)
        in_window = self.spso <= o < self.speo
        return in_window and rec is not None and rec.state is ACQUIRED and rec.owner == member

    def apply_ack(self, member: str, o: int, t: AcknowledgeType, now: int) -> None:
        rec = self.recs.get(o)
        if t == AcknowledgeType.GAP:
            if rec is not None and rec.state is ACQUIRED and rec.owner == member:
                self.end_attempt(o, ARCHIVED)
        elif t == AcknowledgeType.ACCEPT:
            self.end_attempt(o, ACKNOWLEDGED)
        elif t == AcknowledgeType.REJECT:
            self.end_attempt(o, self.given_up())
        elif t == AcknowledgeType.RELEASE:
            self.release(o)
        else:
            assert rec is not None
            rec.deadline = now + self.limits.current.lock_duration_ms

    def release_where(self, due: bool, member: str | None, now: int) -> int:
        n = 0
        for o in range(self.spso, self.speo):
            rec = self.recs[o]
            if rec.state is not ACQUIRED:
                continue
            assert rec.deadline is not None
            if (due and rec.deadline <= now) or (member is not None and rec.owner == member):
                self.release(o)
                n += 1
        self.advance()
        return n

    def move_start(self, log_start: int) -> int:
        """DeleteRecords moved the log start: every open record below it is archived (the
        checkpoint that records this is not a change of the acknowledgement kind); how many."""
        archived = 0
        for o in range(self.spso, min(log_start, self.speo)):
            if self.recs[o].state not in (ACKNOWLEDGED, ARCHIVED):
                self.recs[o] = Rec(ARCHIVED, self.recs[o].count)
                archived += 1
        self.advance()
        if self.speo < log_start:
            self.spso = self.speo = log_start
        return archived

    def holders(self) -> list[str]:
        return sorted({r.owner for r in self.recs.values() if r.owner is not None})

    def restart(self) -> None:
        """Crash and recovery: acquired records come back available, count less one."""
        for o, rec in self.recs.items():
            if rec.state is ACQUIRED:
                self.recs[o] = Rec(AVAILABLE, rec.count - 1)
        self.changes.clear()
        self.advance()

    def durable(self) -> list[StateRange]:
        out: list[StateRange] = []
        for o in range(self.spso, self.speo):
            rec = self.recs[o]
            state, count = (
                (AVAILABLE, rec.count - 1) if rec.state is ACQUIRED else (rec.state, rec.count)
            )
            if out and out[-1].state is state and out[-1].delivery_count == count:
                out[-1] = StateRange(out[-1].first_offset, o, state, count)
            else:
                out.append(StateRange(o, o, state, count))
        return out


def parse_acks(batches: list[AckBatch]) -> dict[int, int] | None:
    """offset -> ack type, or None for a malformed request (INVALID_REQUEST)."""
    types: dict[int, int] = {}
    prev_last: int | None = None
    for first, last, ts in batches:
        if first > last or (prev_last is not None and first <= prev_last):
            return None
        if not ts or any(t not in range(5) for t in ts) or len(ts) not in (1, last - first + 1):
            return None
        for o in range(first, last + 1):
            types[o] = ts[0] if len(ts) == 1 else ts[o - first]
        prev_last = last
    return types


def to_ranges(got: list[tuple[int, int]]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for o, c in got:
        if out and out[-1].last_offset + 1 == o and out[-1].delivery_count == c:
            out[-1] = AcquiredRecords(out[-1].first_offset, o, c)
        else:
            out.append(AcquiredRecords(o, o, c))
    return out


ack_type = st.sampled_from([0, 1, 1, 1, 2, 2, 3, 4, 4])


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.limits = Limits()
        self.log = FakeLog()
        self.now = 0
        self.written: list[StateRange] = []  # durable changes of applied plans, in order

    @initialize(
        start=st.integers(0, 5),
        count_limit=st.integers(2, 5),
        locks=st.integers(5, 60),
        record_limit=st.booleans(),
        dead_letter=st.booleans(),
    )
    def setup(
        self, start: int, count_limit: int, locks: int, record_limit: bool, dead_letter: bool
    ) -> None:
        self.limits.set(
            delivery_count_limit=count_limit,
            max_record_locks=locks,
            lock_duration_ms=10_000,
            record_limit=record_limit,
            dead_letter=dead_letter,
        )
        self.log = FakeLog(end=start)
        self.sp = make_partition(self.limits, start)
        self.model = Model(self.limits, start)

    @rule(
        count=st.integers(1, 12),
        control=st.sampled_from([False, False, False, False, True]),
        skip=st.sampled_from([0, 0, 0, 0, 1, 3]),
    )
    def append(self, count: int, control: bool, skip: int) -> None:
        self.log.append(1 if control else count, control=control, skip=skip)

    @rule(k=st.integers(1, 3))
    def retention(self, k: int) -> None:
        """The log start moves: records never acknowledged may be gone before redelivery."""
        del self.log.spans[:k]

    @rule(
        member=st.sampled_from(MEMBERS),
        max_records=st.integers(0, 40),
        produced=st.lists(
            st.tuples(st.integers(1, 12), st.sampled_from([False, False, False, True])),
            max_size=2,
        ),
    )
    def fetch(self, member: str, max_records: int, produced: list[tuple[int, bool]]) -> None:
        for count, control in produced:  # keeps fetches busy without many append steps
            self.log.append(1 if control else count, control=control)
        offset = self.sp.next_fetch_offset()
        assert offset == self.model.next_fetch_offset()
        if offset is None:
            return
        spans = self.log.read_from(offset)
        before = {o: r.state for o, r in self.model.recs.items()}
        got = self.sp.acquire(member, spans, max_records=max_records, now_ms=self.now)
        want = self.model.acquire(member, spans, max_records, self.now)
        assert got == to_ranges(want)
        if self.limits.current.record_limit:  # KIP-1206: MaxRecords is strict
            assert len(want) <= max_records
        for o, _ in want:  # never handed to two members at once, never below SPSO
            assert before.get(o, AVAILABLE) is AVAILABLE

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def ack_random(self, member: str, data: st.DataObject) -> None:
        batches: list[AckBatch] = []
        for _ in range(data.draw(st.integers(1, 3))):
            first = data.draw(st.integers(self.sp.spso - 2, self.sp.speo + 2))
            last = first + data.draw(st.integers(-1, 10))
            n = max(last - first + 1, 1)
            shape = data.draw(st.sampled_from(["one", "one", "per-offset", "per-offset", "junk"]))
            if shape == "junk":  # unknown types or a length that fits neither form
                types = data.draw(st.lists(st.integers(-1, 6), min_size=0, max_size=n + 1))
            else:
                size = 1 if shape == "one" else n
                types = data.draw(st.lists(ack_type, min_size=size, max_size=size))
            batches.append((first, last, types))
        if data.draw(st.sampled_from([True, True, True, False])):
            batches.sort(key=lambda b: b[0])
        self.check_ack(member, batches)

    @precondition(lambda self: self.model.holders())
    @rule(data=st.data())
    def ack_owned(self, data: st.DataObject) -> None:
        """Acknowledge parts of runs a member really holds, so valid requests are common."""
        member = data.draw(st.sampled_from(self.model.holders()))
        runs: list[tuple[int, int]] = []
        for o in sorted(self.model.recs):
            if self.model.recs[o].owner != member:
                continue
            if runs and runs[-1][1] + 1 == o:
                runs[-1] = (runs[-1][0], o)
            else:
                runs.append((o, o))
        picked = data.draw(st.lists(st.sampled_from(runs), min_size=1, max_size=3, unique=True))
        batches: list[AckBatch] = []
        for lo, hi in sorted(picked):
            first = data.draw(st.integers(lo, hi))
            last = data.draw(st.integers(first, hi))
            size = data.draw(st.sampled_from([1, last - first + 1]))
            batches.append(
                (first, last, data.draw(st.lists(ack_type, min_size=size, max_size=size)))
            )
        self.check_ack(member, batches)

    @precondition(lambda self: self.model.holders())
    @rule(
        data=st.data(),
        step=st.integers(1, 3),
        fetch_between=st.lists(st.tuples(st.sampled_from(MEMBERS), st.integers(0, 20)), max_size=2),
    )
    def ack_owned_in_slices(
        self, data: st.DataObject, step: int, fetch_between: list[tuple[str, int]]
    ) -> None:
        """An acknowledgement planned `step` runs at a time, written, then applied `step` runs
        at a time with fetches between slices (`AckJob` with tiny steps)."""
        member = data.draw(st.sampled_from(self.model.holders()))
        held = sorted(o for o, r in self.model.recs.items() if r.owner == member)
        picked = data.draw(st.lists(st.sampled_from(held), min_size=1, max_size=8, unique=True))
        batches: list[AckBatch] = []
        for o in sorted(picked):  # one offset each, as librdkafka acknowledges one by one
            if batches and batches[-1][1] + 1 == o and data.draw(st.booleans()):
                first, _, types = batches[-1]
                types = [*types, data.draw(ack_type)] if len(types) > 1 else types
                batches[-1] = (first, o, types)  # a longer range, or a per-offset list
            else:
                batches.append((o, o, [data.draw(ack_type)]))
        batches = [
            (f, last, ts if len(ts) in (1, last - f + 1) else ts[:1]) for f, last, ts in batches
        ]
        before = self.snapshot()
        whole = self.sp.plan_acknowledge(member, batches)
        runs = list(ack_runs(batches))
        draft = self.sp.draft(member)
        refused = None
        for k in range(0, len(runs), step):
            refused = refused or self.sp.plan_more(draft, runs[k : k + step])
        assert self.snapshot() == before  # planning changes nothing, in slices too
        if isinstance(whole, ErrorCode):
            assert refused == whole == self.model.acknowledge(member, batches, self.now)
            return
        assert refused is None
        plan = draft.plan()
        assert plan == whole
        types = parse_acks(batches)
        assert types is not None
        self.model.now = self.now
        fetches = iter(fetch_between)
        for k in range(0, len(plan.runs), step):
            self.sp.apply_runs(plan, k, k + step, now_ms=self.now)
            part = plan.runs[k : k + step]
            self.model.acknowledge_part(member, types, part[0][0], part[-1][1])
            self.model.advance()  # each slice moves SPSO over what it finished
            between = next(fetches, None)
            if between is not None and k + step < len(plan.runs):
                self.fetch(between[0], between[1], [])
        assert self.sp.settle(plan) == plan.outcome
        self.model.advance()
        taken = self.sp.take_changes()
        assert tuple(taken) == plan.changes  # what was written is what happened
        self.written += taken

    @precondition(lambda self: self.model.holders())
    @rule(data=st.data())
    def reject_owned(self, data: st.DataObject) -> None:
        """REJECT a record a member holds: with a dead-letter topic it waits in ARCHIVING."""
        member = data.draw(st.sampled_from(self.model.holders()))
        held = sorted(o for o, r in self.model.recs.items() if r.owner == member)
        o = data.draw(st.sampled_from(held))
        self.check_ack(member, [(o, o, [int(AcknowledgeType.REJECT)])])

    def snapshot(self) -> object:
        sp = self.sp
        return (sp.in_flight(), sp.spso, sp.speo, sp.next_deadline(), sp.acquired_count())

    def commit(self, plan: Plan, write_fails: bool) -> bool:
        """The manager's order: plan (no change), write its ranges, then apply; or drop it."""
        if write_fails:
            return False
        # A checkpoint written in place of the delta describes the window as it will be.
        predicted = window_after(self.sp, plan.changes)
        empties = empties_window(self.sp, plan.changes)
        self.sp.apply(plan, now_ms=self.now)
        assert predicted == (self.sp.spso, tuple(self.sp.state_ranges()))
        assert empties == (self.sp.spso == self.sp.speo) or not plan.changes
        taken = self.sp.take_changes()
        assert tuple(taken) == plan.changes  # what was written is what happened
        self.written += taken
        return True

    def check_ack(self, member: str, batches: list[AckBatch], write_fails: bool = False) -> None:
        before = self.snapshot()
        plan = self.sp.plan_acknowledge(member, batches)
        assert self.snapshot() == before  # planning changes nothing
        if isinstance(plan, ErrorCode):  # atomic: nothing at all changed
            assert plan == self.model.acknowledge(member, batches, self.now)
            return
        if self.commit(plan, write_fails):
            assert self.model.acknowledge(member, batches, self.now) == ErrorCode.none

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def ack_with_failed_write(self, member: str, data: st.DataObject) -> None:
        """A write that fails leaves the partition exactly as it was (the model is not told)."""
        held = [b for b in self.sp.in_flight() if b.state is ACQUIRED and b.member_id == member]
        if not held:
            return
        b = data.draw(st.sampled_from(held))
        self.check_ack(member, [(b.first, b.last, [data.draw(ack_type)])], write_fails=True)

    @rule(ms=st.integers(0, 12_000), write_fails=st.booleans())
    def tick(self, ms: int, write_fails: bool) -> None:
        self.now += ms
        before = self.snapshot()
        plan = self.sp.plan_expiry(self.now)
        assert self.snapshot() == before
        if self.commit(plan, write_fails):
            assert plan.records == self.model.release_where(True, None, self.now)

    @rule(data=st.data(), write_fails=st.booleans())
    def log_start_moves(self, data: st.DataObject, write_fails: bool) -> None:
        """DeleteRecords: plan (no change), write the window as a checkpoint, then apply."""
        start = data.draw(st.integers(max(self.sp.spso - 2, 0), self.log.end))
        before = self.snapshot()
        plan = self.sp.plan_log_start(start)
        assert self.snapshot() == before
        if write_fails:
            return
        self.log.spans[:] = [s for s in self.log.spans if s.last_offset >= start]
        self.sp.apply_log_start(plan)
        assert plan.archived == self.model.move_start(start)
        # The checkpoint written before it describes the window as it now is.
        assert (self.sp.spso, self.sp.speo) == (plan.start_offset, plan.end_offset)
        assert tuple(self.sp.state_ranges()) == plan.ranges

    @rule(budget=st.integers(1, 30), write_fails=st.booleans())
    def copy_dead_letters(self, budget: int, write_fails: bool) -> None:
        """The manager's dead-letter pass: copies appended, then the archiving written and
        applied; a failed write (or a crash) leaves them ARCHIVING, to be copied again."""
        before = self.snapshot()
        runs = self.sp.archiving.runs(budget)
        changes = self.sp.archiving.plan_end(runs)
        assert self.snapshot() == before  # planning changes nothing
        assert all(r.state is ARCHIVING for r in runs)
        assert sum(r.last_offset - r.first_offset + 1 for r in runs) <= budget
        if write_fails:
            return
        predicted = window_after(self.sp, changes)
        archived = self.sp.archiving.apply_end(changes)
        assert predicted == (self.sp.spso, tuple(self.sp.state_ranges()))
        assert archived == len(self.model.copy_dead_letters(budget))
        taken = self.sp.take_changes()
        assert taken == changes  # what was written is what happened
        self.written += taken

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        got = self.sp.release_member(member, self.now)
        assert got == self.model.release_where(False, member, self.now)

    @rule(
        count_limit=st.integers(2, 6),
        locks=st.integers(3, 60),
        renew=st.booleans(),
        duration=st.integers(1_000, 15_000),
        record_limit=st.booleans(),
        dead_letter=st.booleans(),
    )
    def change_limits(
        self,
        count_limit: int,
        locks: int,
        renew: bool,
        duration: int,
        record_limit: bool,
        dead_letter: bool,
    ) -> None:
        self.limits.set(
            delivery_count_limit=count_limit,
            max_record_locks=locks,
            renew_enabled=renew,
            lock_duration_ms=duration,
            record_limit=record_limit,
            dead_letter=dead_letter,
        )

    @rule()
    def restart(self) -> None:
        ranges = self.sp.state_ranges()
        self.sp = make_partition(self.limits)
        self.sp.restore(self.model.spso, self.model.speo, ranges)
        self.model.restart()

    @invariant()
    def same_window(self) -> None:
        assert (self.sp.spso, self.sp.speo) == (self.model.spso, self.model.speo)

    @invariant()
    def same_records(self) -> None:
        got = {}
        for b in self.sp.in_flight():
            for o in range(b.first, b.last + 1):
                got[o] = (b.state, b.delivery_count, b.member_id, b.deadline)
        want = {o: r.key() for o, r in self.model.recs.items()}
        assert got == want
        runs = sum(1 for _ in groupby(want[o] for o in sorted(want)))
        assert self.sp.range_count() == runs  # fully merged
        assert self.sp.acquired_count() == sum(
            r.state is ACQUIRED for r in self.model.recs.values()
        )
        assert self.sp.archiving.count() == sum(
            r.state is ARCHIVING for r in self.model.recs.values()
        )
        assert self.sp.open_records() == sum(
            r.state in (AVAILABLE, ACQUIRED, ARCHIVING) for r in self.model.recs.values()
        )
        deadlines = [r.deadline for r in self.model.recs.values() if r.deadline is not None]
        assert self.sp.next_deadline() == (min(deadlines) if deadlines else None)

    @invariant()
    def same_durable_state(self) -> None:
        assert self.sp.state_ranges() == self.model.durable()
        got = {
            o: (r.state, r.delivery_count)
            for r in self.written + self.sp.take_changes()
            for o in range(r.first_offset, r.last_offset + 1)
        }
        assert got == self.model.changes
        self.model.changes.clear()
        self.written.clear()


SharePartitionMachine.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSharePartitionMachine = SharePartitionMachine.TestCase
