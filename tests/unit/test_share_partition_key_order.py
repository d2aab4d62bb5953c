"""Key-ordered acquisition (share.key.ordering.enable) against a per-offset model, driven by
Hypothesis, in the style of test_share_partition_state_machine.

The model states the rule literally, offset by offset: an AVAILABLE record with a key is
acquired only if no record of its key is ACQUIRED, nor AVAILABLE at a lower offset, and only by
the member whose hash range holds the key; null keys go to anyone. Invariants: at most one
record of a key is ACQUIRED; every record of a key below an ACQUIRED one is done; each key's
ACCEPTs come in offset order, across releases, lock expiry, departures and restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import precondition
from hypothesis.stateful import rule
from kio.schema.errors import ErrorCode

from broker.share.acquire.key_ordered import AFFINITY_IDLE_MS
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from tests.hypothesis_profiles import examples
from tests.unit.test_share_partition_support import FakeLog
from tests.unit.test_share_partition_support import Limits
from tests.unit.test_share_partition_support import Rec
from tests.unit.test_share_partition_support import WindowModel
from tests.unit.test_share_partition_support import make_partition

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED
MEMBERS = ("A", "B", "C")
# 32-bit key hashes spread over the hash space (so every member owns some), and null keys.
KEYS = (None, 7, 1 << 30, (2 << 30) + 3, (3 << 30) + 9, 0xFFFFFFFF)


@dataclass
class KeyedLog(FakeLog):
    keys: dict[int, int | None] = field(default_factory=dict)

    def append_keyed(self, keys: list[int | None], control: bool) -> None:
        span = self.append(1 if control else len(keys), control=control)
        if not control:
            for offset, key in zip(
                range(span.base_offset, span.last_offset + 1), keys, strict=True
            ):
                self.keys[offset] = key

    def keys_of(self, spans: list[BatchSpan]) -> dict[int, int | None]:
        return {
            o: self.keys[o]
            for s in spans
            if not s.is_control
            for o in range(s.base_offset, s.last_offset + 1)
        }


class Model(WindowModel):
    """The key rule applied per offset; window bookkeeping as the SharePartition model."""

    def __init__(self, limits: Limits, keys: dict[int, int | None]) -> None:
        super().__init__(limits, 0)
        self.keys = keys
        self.fetched_at: dict[str, int] = {}

    def owner(self, key: int, now: int) -> str:
        live = sorted(m for m, t in self.fetched_at.items() if now - t <= AFFINITY_IDLE_MS)
        return live[key * len(live) >> 32]

    def may_take(self, o: int, member: str, now: int) -> bool:
        key = self.keys.get(o)
        if key is None:
            return True
        for p in range(self.spso, self.speo):
            r = self.recs[p]
            if self.keys.get(p) != key or p == o:
                continue
            if r.state is ACQUIRED or (r.state is AVAILABLE and p < o):
                return False
        return self.owner(key, now) == member

    def acquire(
        self, member: str, spans: list[BatchSpan], max_records: int, now: int
    ) -> list[tuple[int, int]]:
        start = self.next_fetch_offset()
        if start is None or max_records <= 0:
            return []
        self.fetched_at[member] = now
        end = self.join(spans, start)
        got: list[tuple[int, int]] = []
        deadline = now + self.limits.current.lock_duration_ms
        for o in range(max(start, self.spso), end):
            if len(got) >= max_records:
                break
            rec = self.recs[o]
            if rec.state is AVAILABLE and self.may_take(o, member, now):
                self.recs[o] = Rec(ACQUIRED, rec.count + 1, member, deadline)
                got.append((o, rec.count + 1))
        return got

    def join(self, spans: list[BatchSpan], cursor: int) -> int:
        """The spans enter the window whole (within the lock limit); where their keys end."""
        end, added_new = cursor, False
        locks = self.limits.current.max_record_locks
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
            if span.last_offset >= self.speo:
                fits = span.last_offset + 1 - self.spso <= locks
                if not (fits or (not added_new and self.speo - self.spso < locks)):
                    break
                added_new = True
                for o in range(max(lo, self.speo), span.last_offset + 1):
                    self.recs[o] = Rec(AVAILABLE, 0)
                self.speo = span.last_offset + 1
            end = cursor
        return end

    def end_attempt(self, o: int, ack: AcknowledgeType) -> None:
        rec = self.recs[o]
        if ack is AcknowledgeType.ACCEPT:
            state = ACKNOWLEDGED
        elif ack is AcknowledgeType.REJECT:
            state = ARCHIVED
        else:
            at_limit = rec.count >= self.limits.current.delivery_count_limit
            state = ARCHIVED if at_limit else AVAILABLE
        self.recs[o] = Rec(state, rec.count)

    def restart(self) -> None:
        for o, rec in self.recs.items():
            if rec.state is ACQUIRED:
                self.recs[o] = Rec(AVAILABLE, rec.count - 1)
        self.fetched_at.clear()
        self.advance()


def to_ranges(got: list[tuple[int, int]]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for o, c in got:
        if out and out[-1].last_offset + 1 == o and out[-1].delivery_count == c:
            out[-1] = AcquiredRecords(out[-1].first_offset, o, c)
        else:
            out.append(AcquiredRecords(o, o, c))
    return out


class KeyOrderMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.limits = Limits()
        self.log = KeyedLog()
        self.now = 0
        self.accepted: dict[int, int] = {}  # key -> highest offset accepted

    @initialize(count_limit=st.integers(2, 4), locks=st.integers(5, 40))
    def setup(self, count_limit: int, locks: int) -> None:
        self.limits.set(
            delivery_count_limit=count_limit,
            max_record_locks=locks,
            lock_duration_ms=10_000,
            key_ordering=True,
        )
        self.sp: SharePartition = make_partition(self.limits)
        self.model = Model(self.limits, self.log.keys)

    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=10),
        control=st.sampled_from([False, False, False, False, True]),
    )
    def append(self, keys: list[int | None], control: bool) -> None:
        self.log.append_keyed(keys, control)

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 12))
    def fetch(self, member: str, max_records: int) -> None:
        offset = self.sp.next_fetch_offset()
        assert offset == self.model.next_fetch_offset()
        if offset is None:
            return
        # As the broker does: keys only past those the partition remembers, spans only as
        # far as the window may grow. The model reads every key from the log itself.
        lo, hi = self.sp.keys_wanted()
        spans = [s for s in self.log.read_from(offset) if s.base_offset < hi]
        keys = self.log.keys_of([s for s in spans if s.last_offset >= lo])
        got = self.sp.acquire(member, spans, max_records=max_records, now_ms=self.now, keys=keys)
        assert got == to_ranges(self.model.acquire(member, spans, max_records, self.now))

    def held(self, member: str) -> list[int]:
        return [o for o, r in sorted(self.model.recs.items()) if r.owner == member]

    @precondition(lambda self: any(r.state is ACQUIRED for r in self.model.recs.values()))
    @rule(data=st.data())
    def acknowledge(self, data: st.DataObject) -> None:
        member = data.draw(
            st.sampled_from(sorted({r.owner for r in self.model.recs.values() if r.owner}))
        )
        held = self.held(member)
        picked = sorted(data.draw(st.lists(st.sampled_from(held), min_size=1, unique=True)))
        acks = [
            data.draw(
                st.sampled_from(
                    [AcknowledgeType.ACCEPT] * 3 + [AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
                )
            )
            for _ in picked
        ]
        code = self.sp.acknowledge(
            member, [(o, o, [int(a)]) for o, a in zip(picked, acks, strict=True)], now_ms=self.now
        )
        assert code == ErrorCode.none
        for o, ack in zip(picked, acks, strict=True):
            key = self.log.keys.get(o)
            if ack is AcknowledgeType.ACCEPT and key is not None:
                assert o > self.accepted.get(key, -1), "a key's ACCEPTs out of offset order"
                self.accepted[key] = o
            self.model.end_attempt(o, ack)
        self.model.advance()

    @rule(ms=st.integers(0, 12_000))
    def tick(self, ms: int) -> None:
        self.now += ms
        self.sp.expire_locks(self.now)
        for o, rec in list(self.model.recs.items()):
            if rec.state is ACQUIRED and rec.deadline is not None and rec.deadline <= self.now:
                self.model.end_attempt(o, AcknowledgeType.RELEASE)
        self.model.advance()

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.sp.forget_member(member)
        self.sp.release_member(member, self.now)
        self.model.fetched_at.pop(member, None)
        for o in self.held(member):
            self.model.end_attempt(o, AcknowledgeType.RELEASE)
        self.model.advance()

    @rule()
    def restart(self) -> None:
        ranges = self.sp.state_ranges()
        self.sp = make_partition(self.limits)
        self.sp.restore(self.model.spso, self.model.speo, ranges)
        self.model.restart()

    @invariant()
    def same_records(self) -> None:
        got = {}
        for b in self.sp.in_flight():
            for o in range(b.first, b.last + 1):
                got[o] = (b.state, b.delivery_count, b.member_id)
        want = {o: (r.state, r.count, r.owner) for o, r in self.model.recs.items()}
        assert got == want
        assert (self.sp.spso, self.sp.speo) == (self.model.spso, self.model.speo)

    @invariant()
    def one_record_of_a_key_in_flight_and_lower_ones_done(self) -> None:
        held: dict[int, int] = {}
        for o, rec in self.model.recs.items():
            key = self.log.keys.get(o)
            if rec.state is not ACQUIRED or key is None:
                continue
            assert key not in held, f"key {key} acquired at {held.get(key)} and {o}"
            held[key] = o
        for o, rec in self.model.recs.items():
            key = self.log.keys.get(o)
            if key in held and o < held[key]:
                assert rec.state in (ACKNOWLEDGED, ARCHIVED), (o, held[key], rec)


KeyOrderMachine.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestKeyOrderMachine = KeyOrderMachine.TestCase
