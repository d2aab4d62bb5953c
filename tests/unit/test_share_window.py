"""ShareWindow on its own, and the acquisition policies over it with no SharePartition.

The SharePartition tests and Hypothesis machines hold the whole against per-offset models;
these pin the window's own calls, and show how a policy is tested: a window, a `Fetch`, and
what came back (a new rule in `broker/share/acquire/` gets a test like the last ones here).
"""

from __future__ import annotations

import pytest

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
