"""ShareWindow on its own, and the acquisition policies over it with no SharePartition.

The SharePartition tests and Hypothesis machines hold the whole against per-offset models;
these pin the window's own calls, and show how a policy is tested: a window, a `Fetch`, and
what came back (a new rule in `broker/share/acquire/` gets a test like the last ones here).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from broker.share.acquire.batch_optimized import BATCH_OPTIMIZED
from broker.share.acquire.policy import Fetch
from broker.share.acquire.record_limit import RECORD_LIMIT
from broker.share.in_flight import InFlightBatch
from broker.share.record_state import InvalidStateTransition
from broker.share.record_state import RecordState
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ShareWindow
from broker.share.window import StateRange

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED


def states(w: ShareWindow) -> list[tuple[int, int, RecordState, int]]:
    return [(b.first, b.last, b.state, b.delivery_count) for b in w]


def test_walk_archives_gaps_and_control_batches_and_yields_data() -> None:
    w = ShareWindow(0)
    spans = [BatchSpan(2, 4, False), BatchSpan(5, 5, True), BatchSpan(8, 9, False)]
    seen = []
    for lo, last in w.walk(spans, 0):
        seen.append((lo, last))
        w.extend(lo, last)  # the caller brings each data span in before the next
    assert seen == [(2, 4), (8, 9)]
    # 0-1 and 5-7 hold nothing deliverable: archived, so SPSO passes the leading ones.
    assert w.start == 2 and w.end == 10
    assert states(w) == [(2, 4, AVAILABLE, 0), (5, 7, ARCHIVED, 0), (8, 9, AVAILABLE, 0)]
    assert w.take_changes() == []  # the log says it again after a restart: not durable


def test_a_walk_stopped_early_touches_nothing_past_it() -> None:
    w = ShareWindow(0)
    walk = w.walk([BatchSpan(0, 4, False), BatchSpan(7, 9, False)], 0)
    assert next(walk) == (0, 4)
    assert w.end == 0  # the gap 5-6 is archived only when the walk goes on to the next span


def test_acquire_takes_available_then_new_records_within_a_limit() -> None:
    w = ShareWindow(0)
    w.extend(0, 9)
    out: list[AcquiredRecords] = []
    assert w.acquire(2, 5, "m", 100, out) == 4
    assert w.acquire(0, 14, "n", 200, out, limit=5) == 5  # 0-1, 6-8: the cut falls inside
    assert out == [AcquiredRecords(2, 5, 1), AcquiredRecords(0, 1, 1), AcquiredRecords(6, 8, 1)]
    assert w.acquire(0, 14, "n", 200, out) == 6  # 9, and 10-14 past the end
    assert (w.available, w.acquired, w.end) == (0, 15, 15)
    assert w.next_deadline() == 100


def test_finish_records_durable_changes_and_watchers_see_records_leave_acquired() -> None:
    w = ShareWindow(0)
    left: list[tuple[int, int]] = []
    w.watch(lambda first, last: left.append((first, last)))
    w.acquire(0, 9, "m", 100, [])
    w.renew(0, 9, 500)  # same state, same count: no change, nobody told
    assert left == [] and w.take_changes() == [] and w.next_deadline() == 500

    def accept(b: InFlightBatch) -> RecordState | None:
        return ACKNOWLEDGED if b.state is ACQUIRED else None

    assert w.finish(3, 4, accept) == 2
    assert w.finish(5, 6, lambda b: AVAILABLE) == 2
    assert left == [(3, 4), (5, 6)]
    assert w.take_changes() == [
        StateRange(3, 4, ACKNOWLEDGED, 1),
        StateRange(5, 6, AVAILABLE, 1),
    ]
    assert (w.available, w.acquired, w.open_records) == (2, 6, 8)
    with pytest.raises(InvalidStateTransition):
        w.finish(3, 3, lambda b: AVAILABLE)  # ACKNOWLEDGED is terminal


def test_archive_below_moves_the_start_and_may_start_afresh() -> None:
    w = ShareWindow(0)
    w.acquire(0, 9, "m", 100, [])
    w.archive_below(4)
    assert (w.start, w.end, w.acquired) == (4, 10, 6)
    w.archive_below(20)
    assert (w.start, w.end, w.open_records) == (20, 20, 0)


def fetch(spans: list[BatchSpan], max_records: int, locks: int = 1000) -> Fetch:
    return Fetch("m", spans, 0, max_records, now_ms=0, deadline=30_000, max_record_locks=locks)


def test_batch_optimized_takes_whole_batches_past_max_records() -> None:
    w = ShareWindow(0)
    spans = [BatchSpan(0, 3, False), BatchSpan(4, 9, False), BatchSpan(10, 19, False)]
    assert BATCH_OPTIMIZED.acquire(w, fetch(spans, 5)) == [AcquiredRecords(0, 9, 1)]


def test_record_limit_cuts_inside_a_batch() -> None:
    w = ShareWindow(0)
    spans = [BatchSpan(0, 3, False), BatchSpan(4, 9, False)]
    assert RECORD_LIMIT.acquire(w, fetch(spans, 5)) == [AcquiredRecords(0, 4, 1)]
    assert w.end == 5  # the rest of the batch never joined the window


def test_the_first_new_batch_goes_whole_when_the_window_has_room_for_one_record() -> None:
    w = ShareWindow(0)
    spans = [BatchSpan(0, 9, False), BatchSpan(10, 19, False)]
    assert BATCH_OPTIMIZED.acquire(w, fetch(spans, 100, locks=4)) == [AcquiredRecords(0, 9, 1)]


def test_hand_over_passes_acquired_records_to_a_transaction_without_a_lock() -> None:
    """TxnShareAcknowledge's TX_PENDING: the records stay ACQUIRED with their count, owned by
    the transaction, and leave the lock timer (no expiry until the transaction ends)."""
    w = ShareWindow(0)
    w.acquire(0, 9, "m", 100, [])
    w.hand_over(2, 5, "txn-pending:7")
    assert [(b.first, b.last, b.member_id, b.deadline) for b in w] == [
        (0, 1, "m", 100), (2, 5, "txn-pending:7", None), (6, 9, "m", 100)
    ]  # fmt: skip
    assert w.acquired == 6  # locks held: the handed-over records left the lock timer
    assert [b.delivery_count for b in w] == [1, 1, 1]


# The one-step paths of the common case, held to the general ones on twin windows ---------

_ops = st.lists(
    st.tuples(
        st.sampled_from(("extend", "acquire", "archive", "finish", "hand_over")),
        st.integers(0, 6),
        st.integers(0, 3),
        st.sampled_from((ACKNOWLEDGED, ARCHIVED, AVAILABLE)),
    ),
    max_size=12,
)


def _built(ops: list[tuple[str, int, int, RecordState]]) -> ShareWindow:
    """A window after some extends, acquisitions, archivals, finished attempts and
    records staged in a transaction."""
    w = ShareWindow(0)
    for kind, a, n, target in ops:
        lo = min(w.start + a, w.end)  # the window grows from its end only
        if kind == "extend":
            w.extend(w.end, w.end + n)
        elif kind == "acquire":
            w.acquire(lo, lo + n, "m" if a % 2 else "n", 100 + a, [])
        elif kind == "archive":
            w.archive_absent(lo, lo + n)
        elif kind == "hand_over" and lo + n < w.end:  # to "m", with no lock (a transaction)
            if all(b.state is ACQUIRED for b in w.ranges_in(lo, lo + n)):
                w.hand_over(lo, lo + n, "m")
        elif kind == "finish" and lo + n < w.end:
            w.finish(lo, lo + n, lambda b, t=target: t if b.state is ACQUIRED else None)
            w.advance_start()
    return w


def _seen(w: ShareWindow) -> object:
    return (
        [(b.first, b.last, b.state, b.delivery_count, b.member_id, b.deadline, b.not_before)
         for b in w],
        w.start, w.end, w.available, w.acquired, w.archiving, w.next_deadline(),
        w.take_changes(),
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(ops=_ops, gap=st.integers(0, 3), size=st.integers(0, 3), at_end=st.booleans())
def test_archive_absent_at_the_end_equals_archiving_in_place(
    ops: list[tuple[str, int, int, RecordState]], gap: int, size: int, at_end: bool
) -> None:
    """A control batch met at (or past) the window's end is appended ARCHIVED in one step:
    the same ranges, counters and changes as appending it AVAILABLE and archiving it."""
    one, two = _built(ops), _built(ops)
    first = one.end + (0 if at_end else gap)
    outcomes = []
    for call in (one.archive_absent, two.archive_absent_in_place):
        try:
            call(first, first + size - 1)
            outcomes.append(None)
        except ValueError as e:  # past the end: refused alike
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
    assert _seen(one) == _seen(two)


@settings(max_examples=300, deadline=None)
@given(ops=_ops, member=st.sampled_from(("m", "n")), cut=st.integers(0, 2))
def test_accept_sole_equals_finishing_the_range(
    ops: list[tuple[str, int, int, RecordState]], member: str, cut: int
) -> None:
    """Where `sole_hold` finds the member's range, `accept_sole` leaves what `finish` to
    ACKNOWLEDGED and `advance_start` leave; where it finds none, finishing would not be the
    common case (another range open, another member, no lock, or not [first, last])."""
    one, two = _built(ops), _built(ops)
    first = one.start
    last = first + cut
    b = one.sole_hold(member, first, last)
    if b is None:
        open_ = [x for x in two if not x.state.is_terminal]
        assert not (
            len(open_) == 1
            and open_[0].first == first
            and open_[0].last == last
            and open_[0].state is ACQUIRED
            and open_[0].member_id == member
            and open_[0].deadline is not None
        )
        return
    one.accept_sole(b)
    two.finish(first, last, lambda x: ACKNOWLEDGED)
    two.advance_start()
    assert _seen(one) == _seen(two)


def test_records_staged_in_a_transaction_are_not_the_common_accept() -> None:
    """A range held with no lock (staged by a transaction, `hand_over`) is not counted as
    acquired, so an AVAILABLE range of its size would make the open records add up: the lock
    is checked too, and the general path decides."""
    w = ShareWindow(0)
    w.extend(0, 1)
    w.acquire(0, 0, "m", 100, [])
    w.hand_over(0, 0, "m")
    assert w.open_records == 1  # record 1, AVAILABLE
    assert w.sole_hold("m", 0, 0) is None
