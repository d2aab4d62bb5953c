"""SharePartition unit tests: the transition table, limits, acknowledgements, the window."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.share.plans import Moved
from broker.share.plans import Plan
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import InvalidStateTransition
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import StateRange
from tests.unit.test_share_partition_support import FakeLog
from tests.unit.test_share_partition_support import Limits
from tests.unit.test_share_partition_support import fetch
from tests.unit.test_share_partition_support import make_partition

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED
GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AcknowledgeType)


def setup(
    *batches: int,
    start: int = 0,
    delivery_count_limit: int | None = None,
    max_record_locks: int | None = None,
    lock_duration_ms: int | None = None,
    renew_enabled: bool | None = None,
) -> tuple[SharePartition, FakeLog, Limits]:
    """A partition at `start` over a log of batches of the given sizes, default limits."""
    lim = Limits()
    lim.set(
        delivery_count_limit=delivery_count_limit,
        max_record_locks=max_record_locks,
        lock_duration_ms=lock_duration_ms,
        renew_enabled=renew_enabled,
    )
    log = FakeLog(end=start)
    for n in batches:
        log.append(n)
    return make_partition(lim, start), log, lim


def states(sp: SharePartition, first: int, last: int) -> list[tuple[RecordState, int]]:
    return [sp.state_of(o) for o in range(first, last + 1)]


# ------------------------------------------------------------------ the transition table

ALLOWED = {
    (AVAILABLE, ACQUIRED),
    (AVAILABLE, ARCHIVED),
    (ACQUIRED, AVAILABLE),
    (ACQUIRED, ACKNOWLEDGED),
    (ACQUIRED, ARCHIVED),
    (ACQUIRED, RecordState.ARCHIVING),  # KIP-1191: given up on, in a group with a DLQ topic
    (RecordState.ARCHIVING, ARCHIVED),
}


@pytest.mark.parametrize("old", list(RecordState))
@pytest.mark.parametrize("new", list(RecordState))
def test_transition_table(old: RecordState, new: RecordState) -> None:
    if (old, new) in ALLOWED:
        assert old.validate_transition(new) is new
    else:
        with pytest.raises(InvalidStateTransition):
            old.validate_transition(new)


def test_wire_values() -> None:
    assert [int(s) for s in RecordState] == [0, 1, 2, 3, 4]
    assert [int(t) for t in AcknowledgeType] == [0, 1, 2, 3, 4]


# ------------------------------------------------------------ acknowledgement, per type


def test_accept_reject_release_renew_gap_on_one_batch() -> None:
    sp, log, _ = setup(10)
    assert fetch(sp, log, "m", now=0) == [AcquiredRecords(0, 9, 1)]
    types = [ACCEPT, ACCEPT, REJECT, RELEASE, RENEW, GAP, ACCEPT, ACCEPT, RELEASE, RELEASE]
    assert sp.acknowledge("m", [(0, 9, types)], now_ms=1_000) == ErrorCode.none
    assert sp.spso == 3  # 0-1 acknowledged, 2 archived
    assert states(sp, 3, 9) == [
        (AVAILABLE, 1),
        (ACQUIRED, 1),
        (ARCHIVED, 1),
        (ACKNOWLEDGED, 1),
        (ACKNOWLEDGED, 1),
        (AVAILABLE, 1),
        (AVAILABLE, 1),
    ]
    assert sp.next_deadline() == 31_000  # RENEW restarted 4's lock at now + 30 s
    assert sp.take_changes() == [
        StateRange(0, 1, ACKNOWLEDGED, 1),
        StateRange(2, 2, ARCHIVED, 1),
        StateRange(3, 3, AVAILABLE, 1),
        StateRange(5, 5, ARCHIVED, 1),
        StateRange(6, 7, ACKNOWLEDGED, 1),
        StateRange(8, 9, AVAILABLE, 1),
    ]


def test_ranges_split_and_merge_back() -> None:
    sp, log, _ = setup(*[100] * 10)
    assert fetch(sp, log, "m", now=0, max_records=1_000) == [AcquiredRecords(0, 999, 1)]
    assert sp.range_count() == 1  # ten batches, one range
    assert sp.acknowledge("m", [(400, 449, [RENEW])], now_ms=10) == ErrorCode.none
    assert sp.range_count() == 3
    assert sp.acknowledge("m", [(0, 399, [RENEW]), (450, 999, [RENEW])], now_ms=10) == 0
    assert sp.range_count() == 1  # same state, count, owner and deadline again
    assert sp.acknowledge("m", [(0, 999, [ACCEPT])], now_ms=20) == ErrorCode.none
    assert (sp.spso, sp.speo, sp.range_count()) == (1000, 1000, 0)


def test_gap_archives_only_what_the_member_holds() -> None:
    sp, log, _ = setup(4, 4)
    fetch(sp, log, "a", now=0, max_records=4)
    fetch(sp, log, "b", now=0, max_records=4)
    # A GAP is never an error, even over another member's records or outside the window.
    assert sp.acknowledge("a", [(2, 5, [GAP]), (20, 30, [GAP])], now_ms=1) == ErrorCode.none
    assert states(sp, 0, 7) == [(ACQUIRED, 1)] * 2 + [(ARCHIVED, 1)] * 2 + [(ACQUIRED, 1)] * 4


def test_the_outcome_says_why_records_moved() -> None:
    """A GAP, a REJECT and a release at the limit all end ARCHIVED; the outcome tells them
    apart (the manager counts delivery-limit archivals from it)."""
    sp, log, _ = setup(10, delivery_count_limit=2)
    fetch(sp, log, "m", now=0)
    assert sp.acknowledge("m", [(6, 9, [RELEASE])], now_ms=1) == ErrorCode.none
    fetch(sp, log, "m", now=2)  # 6-9 again, at their second delivery
    plan = sp.plan_acknowledge(
        "m", [(0, 1, [GAP]), (2, 2, [REJECT]), (3, 4, [ACCEPT]), (5, 5, [RENEW]), (6, 9, [RELEASE])]
    )
    assert isinstance(plan, Plan)
    outcome = sp.apply(plan, now_ms=3)
    assert {why: outcome[why] for why in Moved} == {
        Moved.GAP: 2,
        Moved.REJECTED: 1,
        Moved.ACCEPTED: 2,
        Moved.RENEWED: 1,
        Moved.DELIVERY_LIMIT: 4,
        Moved.RELEASED: 0,
    }
    assert sp.spso == 5  # 0-4 are done and SPSO moved past them
    assert states(sp, 5, 9) == [(ACQUIRED, 1)] + [(ARCHIVED, 2)] * 4
    # A release below the limit, and a GAP over records another member holds: moved, and not.
    fetch(sp, log, "m", now=4)
    assert sp.plan_expiry(10**9).outcome[Moved.RELEASED] == 1
    gap = sp.plan_acknowledge("other", [(5, 5, [GAP])])
    assert isinstance(gap, Plan) and gap.outcome.moved == {}


# --------------------------------------------------------------- delivery-count limit


def test_release_on_every_delivery_archives_at_the_limit() -> None:
    sp, log, _ = setup(5, delivery_count_limit=3)
    for attempt in (1, 2, 3):
        assert fetch(sp, log, "m", now=attempt) == [AcquiredRecords(0, 4, attempt)]
        assert sp.acknowledge("m", [(0, 4, [RELEASE])], now_ms=attempt) == ErrorCode.none
    assert (sp.spso, sp.speo) == (5, 5)  # archived at count 3 and swept
    assert sp.take_changes() == [StateRange(0, 4, ARCHIVED, 3)]


def test_lock_expiry_at_the_limit_archives() -> None:
    sp, log, _ = setup(3, delivery_count_limit=2, lock_duration_ms=1_000)
    fetch(sp, log, "m", now=0)
    assert sp.expire_locks(1_000) == 3
    assert states(sp, 0, 2) == [(AVAILABLE, 1)] * 3
    fetch(sp, log, "m", now=2_000)
    assert sp.expire_locks(2_999) == 0
    assert sp.expire_locks(3_000) == 3
    assert (sp.spso, sp.speo) == (3, 3)


def test_lowered_count_limit_allows_a_final_attempt_beyond_it() -> None:
    # Seed 002: the limit is not checked when an attempt starts, only when it ends.
    sp, log, lim = setup(2, delivery_count_limit=5)
    for now in (1, 2):
        fetch(sp, log, "m", now=now)
        sp.acknowledge("m", [(0, 1, [RELEASE])], now_ms=now)
    assert states(sp, 0, 1) == [(AVAILABLE, 2)] * 2
    lim.set(delivery_count_limit=2)
    assert fetch(sp, log, "m", now=3) == [AcquiredRecords(0, 1, 3)]  # the final attempt
    assert sp.acknowledge("m", [(0, 1, [RELEASE])], now_ms=4) == ErrorCode.none
    assert (sp.spso, sp.speo) == (2, 2)  # 3 >= 2: archived
    assert sp.take_changes()[-1] == StateRange(0, 1, ARCHIVED, 3)


def test_raised_count_limit_gives_more_attempts_to_records_in_flight() -> None:
    sp, log, lim = setup(1, delivery_count_limit=2)
    fetch(sp, log, "m", now=0)
    sp.acknowledge("m", [(0, 0, [RELEASE])], now_ms=1)
    fetch(sp, log, "m", now=2)  # attempt 2 of 2 under the old limit
    lim.set(delivery_count_limit=4)
    assert sp.acknowledge("m", [(0, 0, [RELEASE])], now_ms=3) == ErrorCode.none
    assert sp.state_of(0) == (AVAILABLE, 2)
    assert fetch(sp, log, "m", now=4) == [AcquiredRecords(0, 0, 3)]


# -------------------------------------------------------------------- record-lock limit


def test_window_cap_allows_the_whole_first_batch() -> None:
    sp, log, _ = setup(150, 10, max_record_locks=100)
    assert fetch(sp, log, "m", now=0) == [AcquiredRecords(0, 149, 1)]
    assert sp.in_flight_count() == 150
    assert sp.next_fetch_offset() is None
    assert fetch(sp, log, "m", now=0) == []


def test_window_cap_stops_before_a_batch_that_does_not_fit() -> None:
    sp, log, _ = setup(60, 30, 30, 5, max_record_locks=100)
    assert fetch(sp, log, "m", now=0, max_records=1_000) == [AcquiredRecords(0, 89, 1)]
    # 90 in flight: room for one record, so the next batch (30 records) goes whole...
    assert fetch(sp, log, "m", now=0) == [AcquiredRecords(90, 119, 1)]
    # ...but only as the first new batch of a fetch.
    assert fetch(sp, log, "m", now=0) == []


def test_lowered_lock_limit_stops_new_acquisition_until_the_window_drains() -> None:
    sp, log, lim = setup(*[10] * 10, max_record_locks=1_000)
    fetch(sp, log, "m", now=0, max_records=50)
    lim.set(max_record_locks=20)
    assert sp.next_fetch_offset() is None
    sp.acknowledge("m", [(0, 9, [RELEASE])], now_ms=1)
    # Available records in the window are redelivered even while it is over the limit.
    assert fetch(sp, log, "n", now=2) == [AcquiredRecords(0, 9, 2)]
    assert sp.next_fetch_offset() is None
    sp.acknowledge("m", [(10, 39, [ACCEPT])], now_ms=3)
    assert sp.next_fetch_offset() is None  # 0-9 and 40-49 in flight: 50 > 20
    sp.acknowledge("n", [(0, 9, [ACCEPT])], now_ms=3)
    assert (sp.spso, sp.in_flight_count()) == (40, 10)
    assert fetch(sp, log, "m", now=4) == [AcquiredRecords(50, 59, 1)]


def test_max_records_keeps_batch_boundaries() -> None:
    sp, log, _ = setup(10, 10, 10)
    assert fetch(sp, log, "m", now=0, max_records=15) == [AcquiredRecords(0, 19, 1)]
    assert fetch(sp, log, "m", now=0, max_records=1) == [AcquiredRecords(20, 29, 1)]
    assert fetch(sp, log, "m", now=0, max_records=0) == []


# ---------------------------------------------------------------- ownership and errors


def test_only_the_acquiring_member_may_acknowledge() -> None:
    sp, log, _ = setup(10)
    fetch(sp, log, "a", now=0)
    before = sp.in_flight()
    assert sp.acknowledge("b", [(0, 9, [ACCEPT])], now_ms=1) == ErrorCode.invalid_record_state
    assert sp.acknowledge("b", [(3, 3, [RENEW])], now_ms=1) == ErrorCode.invalid_record_state
    assert sp.in_flight() == before
    assert sp.take_changes() == []


@pytest.mark.parametrize(
    "batches",
    [
        [(10, 10, [ACCEPT])],  # at SPEO, never delivered
        [(0, 10, [ACCEPT])],  # runs past SPEO
        [(0, 4, [ACCEPT]), (5, 5, [ACCEPT])],  # 5 is AVAILABLE
        [(6, 6, [ACCEPT])],  # 6 is ACKNOWLEDGED
    ],
)
def test_records_not_held_are_invalid_record_state(
    batches: list[tuple[int, int, list[int]]],
) -> None:
    sp, log, _ = setup(10)
    fetch(sp, log, "a", now=0)
    sp.acknowledge("a", [(5, 6, [RELEASE, ACCEPT])], now_ms=1)
    sp.take_changes()
    before = sp.in_flight()
    assert sp.acknowledge("a", batches, now_ms=2) == ErrorCode.invalid_record_state
    assert sp.in_flight() == before
    assert sp.take_changes() == []


def test_below_spso_is_invalid_record_state() -> None:
    sp, log, _ = setup(10, 10)
    fetch(sp, log, "a", now=0, max_records=10)
    sp.acknowledge("a", [(0, 9, [ACCEPT])], now_ms=1)
    assert sp.acknowledge("a", [(5, 5, [ACCEPT])], now_ms=2) == ErrorCode.invalid_record_state


def test_renew_disabled_is_refused_and_nothing_changes() -> None:
    sp, log, lim = setup(10, renew_enabled=False, lock_duration_ms=1_000)
    fetch(sp, log, "a", now=0)
    before = sp.in_flight()
    # The ACCEPT before the RENEW must not be applied: the request is atomic.
    code = sp.acknowledge("a", [(0, 4, [ACCEPT]), (5, 9, [RENEW])], now_ms=500)
    assert code == ErrorCode.invalid_record_state
    assert sp.in_flight() == before
    assert sp.take_changes() == []
    lim.set(renew_enabled=True)
    assert sp.acknowledge("a", [(5, 9, [RENEW])], now_ms=500) == ErrorCode.none
    assert sp.expire_locks(1_000) == 5  # 0-4 expire, 5-9 now run to 1,500
    assert sp.expire_locks(1_500) == 5


@pytest.mark.parametrize(
    "batches",
    [
        [(0, 4, [ACCEPT]), (5, 9, [5])],  # unknown type after a valid batch
        [(0, 4, [-1])],
        [(5, 4, [ACCEPT])],  # first > last
        [(5, 9, [ACCEPT]), (0, 4, [ACCEPT])],  # unsorted
        [(0, 5, [ACCEPT]), (5, 9, [ACCEPT])],  # overlapping
        [(0, 4, [ACCEPT, ACCEPT])],  # neither one type nor one per offset
        [(0, 4, [])],
    ],
)
def test_malformed_acks_are_invalid_request_and_change_nothing(
    batches: list[tuple[int, int, list[int]]],
) -> None:
    sp, log, _ = setup(10)
    fetch(sp, log, "a", now=0)
    before = sp.in_flight()
    assert sp.acknowledge("a", batches, now_ms=1) == ErrorCode.invalid_request
    assert sp.in_flight() == before
    assert sp.take_changes() == []


def test_invalid_request_wins_over_invalid_record_state() -> None:
    sp, log, _ = setup(10)
    fetch(sp, log, "a", now=0)
    code = sp.acknowledge("b", [(0, 4, [ACCEPT]), (5, 9, [9])], now_ms=1)
    assert code == ErrorCode.invalid_request


# ---------------------------------------------------------------- control batches, gaps


def test_control_batches_are_never_acquired_and_spso_skips_them() -> None:
    log = FakeLog()
    log.append(5)  # 0-4
    log.append(1, control=True)  # 5
    log.append(5)  # 6-10
    log.append(1, control=True)  # 11
    sp = make_partition(Limits())
    got = fetch(sp, log, "m", now=0)
    assert got == [AcquiredRecords(0, 4, 1), AcquiredRecords(6, 10, 1)]
    assert sp.state_of(5) == (ARCHIVED, 0)
    assert sp.speo == 12
    sp.acknowledge("m", [(0, 4, [ACCEPT])], now_ms=1)
    assert sp.spso == 6
    sp.acknowledge("m", [(6, 10, [ACCEPT])], now_ms=1)
    assert (sp.spso, sp.speo) == (12, 12)
    # Archiving a control batch is rebuilt from the log, so it is not a durable change.
    assert sp.take_changes() == [
        StateRange(0, 4, ACKNOWLEDGED, 1),
        StateRange(6, 10, ACKNOWLEDGED, 1),
    ]


def test_control_batch_at_the_window_start_moves_spso_at_once() -> None:
    log = FakeLog(end=100)
    log.append(1, control=True)
    sp = make_partition(Limits(), 100)
    assert fetch(sp, log, "m", now=0) == []
    assert (sp.spso, sp.speo) == (101, 101)
    assert sp.take_changes() == []


def test_log_gaps_are_archived_and_records_gone_from_the_log_too() -> None:
    log = FakeLog()
    log.append(5)  # 0-4
    log.append(5, skip=3)  # 8-12, 5-7 missing (compaction)
    sp = make_partition(Limits())
    assert fetch(sp, log, "m", now=0) == [AcquiredRecords(0, 4, 1), AcquiredRecords(8, 12, 1)]
    assert states(sp, 5, 7) == [(ARCHIVED, 0)] * 3
    sp.acknowledge("m", [(0, 4, [RELEASE])], now_ms=1)
    del log.spans[0]  # retention removes 0-4 before they are delivered again
    assert sp.next_fetch_offset() == 0
    assert fetch(sp, log, "m", now=2) == []
    assert sp.spso == 8


def test_offsets_below_spso_are_never_acquired() -> None:
    log = FakeLog()
    log.append(10)
    sp = make_partition(Limits(), 5)  # SPSO inside the first batch
    assert fetch(sp, log, "m", now=0) == [AcquiredRecords(5, 9, 1)]
    assert sp.acquire("m", [BatchSpan(0, 9, False)], max_records=10, now_ms=0) == []


# ------------------------------------------------------------- expiry, members, timer


def test_expire_locks_and_next_deadline() -> None:
    sp, log, _ = setup(5, 5, 5, lock_duration_ms=1_000)
    fetch(sp, log, "a", now=0, max_records=5)
    fetch(sp, log, "b", now=100, max_records=5)
    fetch(sp, log, "a", now=200, max_records=5)
    assert sp.next_deadline() == 1_000
    assert sp.expire_locks(999) == 0
    assert sp.expire_locks(1_100) == 10
    assert sp.next_deadline() == 1_200
    assert states(sp, 0, 14) == [(AVAILABLE, 1)] * 10 + [(ACQUIRED, 1)] * 5
    assert sp.take_changes() == [StateRange(0, 9, AVAILABLE, 1)]
    assert sp.acquired_count() == 5


def test_release_member_returns_its_records_only() -> None:
    sp, log, _ = setup(5, 5, delivery_count_limit=2)
    fetch(sp, log, "a", now=0, max_records=5)
    fetch(sp, log, "b", now=0, max_records=5)
    sp.acknowledge("a", [(0, 0, [ACCEPT])], now_ms=1)
    assert sp.release_member("a", now_ms=2) == 4
    assert states(sp, 1, 9) == [(AVAILABLE, 1)] * 4 + [(ACQUIRED, 1)] * 5
    assert sp.release_member("a", now_ms=2) == 0
    fetch(sp, log, "c", now=3)
    assert sp.release_member("c", now_ms=4) == 4  # second attempt: at the limit
    assert sp.spso == 5
    assert sp.acquired_count() == 5


# --------------------------------------------------------------- reset and recovery


def test_reset_drops_in_flight_state() -> None:
    sp, log, _ = setup(10, 10)
    fetch(sp, log, "a", now=0)
    sp.acknowledge("a", [(0, 4, [RELEASE])], now_ms=1)
    sp.reset(15)
    assert (sp.spso, sp.speo, sp.acquired_count(), sp.next_deadline()) == (15, 15, 0, None)
    assert sp.take_changes() == []
    assert fetch(sp, log, "a", now=2) == [AcquiredRecords(15, 19, 1)]


def test_restore_of_state_ranges_round_trips() -> None:
    sp, log, lim = setup(10, 10, 10, delivery_count_limit=4)
    fetch(sp, log, "a", now=0, max_records=30)
    sp.acknowledge("a", [(0, 29, [RELEASE] * 3 + [ACCEPT] * 7 + [RELEASE] * 20)], now_ms=1)
    fetch(sp, log, "b", now=2)  # 0-2 at count 2, 10-29 at count 2
    sp.acknowledge("b", [(10, 14, [REJECT])], now_ms=3)
    durable = sp.state_ranges()
    assert durable == [
        StateRange(0, 2, AVAILABLE, 1),  # acquired, count 2
        StateRange(3, 9, ACKNOWLEDGED, 1),
        StateRange(10, 14, ARCHIVED, 2),
        StateRange(15, 29, AVAILABLE, 1),
    ]
    again = make_partition(lim)
    again.restore(sp.spso, sp.speo, durable)
    assert again.state_ranges() == durable
    assert again.acquired_count() == 0
    assert fetch(again, log, "c", now=4) == [
        AcquiredRecords(0, 2, 2),
        AcquiredRecords(15, 29, 2),
    ]


def test_restore_fills_uncovered_offsets_as_never_delivered() -> None:
    sp, log, _ = setup(10, 10)
    # As the seed recovers after "release 110": only what was recorded is listed.
    sp.restore(0, 12, [StateRange(0, 0, AVAILABLE, 1), StateRange(5, 5, ACKNOWLEDGED, 1)])
    assert states(sp, 0, 6) == [(AVAILABLE, 1)] + [(AVAILABLE, 0)] * 4 + [
        (ACKNOWLEDGED, 1),
        (AVAILABLE, 0),
    ]
    assert fetch(sp, log, "a", now=0, max_records=5) == [
        AcquiredRecords(0, 0, 2),
        AcquiredRecords(1, 4, 1),
        AcquiredRecords(6, 9, 1),
    ]


def test_restore_ignores_ranges_below_spso_and_rejects_bad_input() -> None:
    sp, _, _ = setup()
    sp.restore(10, 20, [StateRange(0, 9, ACKNOWLEDGED, 1), StateRange(8, 10, ACKNOWLEDGED, 1)])
    assert (sp.spso, sp.speo) == (11, 20)
    # A delta past the recorded end moves SPEO (seed 000: "the SPEO in the control records").
    sp.restore(0, 5, [StateRange(7, 8, AVAILABLE, 1)])
    assert (sp.speo, sp.state_of(5), sp.state_of(7)) == (9, (AVAILABLE, 0), (AVAILABLE, 1))
    with pytest.raises(ValueError):
        sp.restore(0, 5, [StateRange(0, 1, ACQUIRED, 1)])
    with pytest.raises(ValueError):
        sp.restore(0, 5, [StateRange(0, 2, ARCHIVED, 1), StateRange(2, 3, ARCHIVED, 1)])
    with pytest.raises(ValueError):
        sp.restore(5, 4, [])


def test_changes_later_wins_between_takes() -> None:
    sp, log, _ = setup(10, lock_duration_ms=1_000)
    fetch(sp, log, "a", now=0)
    sp.expire_locks(1_000)  # 0-9 available (1)
    fetch(sp, log, "b", now=1_000)
    sp.acknowledge("b", [(2, 3, [ACCEPT])], now_ms=1_001)
    assert sp.take_changes() == [
        StateRange(0, 1, AVAILABLE, 1),
        StateRange(2, 3, ACKNOWLEDGED, 2),
        StateRange(4, 9, AVAILABLE, 1),
    ]
    assert sp.take_changes() == []
