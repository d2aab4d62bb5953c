"""The log cleaner and transactions, as Kafka's `LogCleaner` (`CleanedTransactionMetadata`,
`UnifiedLog.firstUncleanableOffset`): aborted records are removed and never supersede a
committed record of their key; committed runs keep the transactional bit; a marker is removed
only once a pass reads none of its transaction's batches and `delete.retention.ms` has passed
(`CleanedTransactionMetadata.onControlBatchRead`, `Cleaner.checkBatchRetention`), an ABORT
marker's transaction leaving the aborted index with it; nothing from the last stable offset on
is cleaned."""

from __future__ import annotations

from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage.base_log import SegmentedLog
from storage.cleaner import plan_cleaning
from storage.memory_log import MemoryLog
from tests.unit.test_log_cleaner import COMPACT
from tests.unit.test_log_cleaner import clean
from tests.unit.test_log_cleaner import put
from tests.unit.test_log_cleaner import records


def txn(log: SegmentedLog, pid: int, seq: int, pairs: list[tuple[bytes, bytes]]) -> int:
    batch = build_batch(
        list(pairs), timestamp_ms=1000, producer_id=pid, producer_epoch=0, base_sequence=seq,
        attributes=TRANSACTIONAL_MASK,
    )  # fmt: skip
    return log.append(batch, now_ms=1000).base_offset


def headers(log: SegmentedLog) -> list[tuple[int, bool, bool, int]]:
    """(base offset, control, transactional, record count) of every batch."""
    data = log.read(0, 1 << 20)
    return [
        (h.base_offset, h.is_control, bool(h.attributes & TRANSACTIONAL_MASK), h.record_count)
        for _, h in iter_batch_headers(data)
    ]


def committed_then_aborted(log: SegmentedLog) -> None:
    """k=committed at 0 (COMMIT at 1); k=aborted, j=aborted at 2-3 (ABORT at 4); then j=plain."""
    txn(log, 7, 0, [(b"k", b"committed")])
    log.append_marker(7, 0, True, now_ms=1000)
    txn(log, 7, 1, [(b"k", b"aborted"), (b"j", b"aborted")])
    log.append_marker(7, 0, False, now_ms=1000)
    put(log, [(b"j", b"plain")])
    log.roll()


def test_aborted_records_are_removed_and_never_supersede_a_committed_one() -> None:
    log = MemoryLog(COMPACT)
    committed_then_aborted(log)
    clean(log)
    # The committed k survives the later aborted k; both aborted records are gone.
    assert records(log) == [(0, b"k", b"committed"), (5, b"j", b"plain")]
    # The committed batch stays transactional; both markers stay; the aborted batch is a gap.
    assert headers(log) == [
        (0, False, True, 1), (1, True, True, 1), (2, False, False, 0), (4, True, True, 1),
        (5, False, False, 1),
    ]  # fmt: skip
    assert log.aborted_transactions(0, log.log_end_offset)[0][1:] == (2, 4)


def test_markers_are_kept_below_a_share_groups_eso() -> None:
    log = MemoryLog(COMPACT)
    committed_then_aborted(log)
    clean(log, eso=log.log_end_offset)
    assert [h[0] for h in headers(log) if h[1]] == [1, 4]


def test_nothing_from_the_last_stable_offset_on_is_cleaned() -> None:
    log = MemoryLog(COMPACT)
    put(log, [(b"k", b"1")])
    log.roll()
    txn(log, 9, 0, [(b"k", b"open")])  # an open transaction from offset 1
    log.roll()
    put(log, [(b"k", b"2")])
    log.roll()
    assert log.last_stable_offset == 1
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None and job.end_offset == 1  # the segments from 1 on wait
    log.append_marker(9, 0, True, now_ms=1000)
    log.roll()
    clean(log)
    assert records(log) == [(2, b"k", b"2")]


def superseded_transactions(log: SegmentedLog) -> None:
    """k committed at 0 (COMMIT at 1), j aborted at 2 (ABORT at 3), then k and j written
    plainly at 4: the committed record is superseded, the aborted one removed."""
    txn(log, 7, 0, [(b"k", b"committed")])
    log.append_marker(7, 0, True, now_ms=1000)
    txn(log, 7, 1, [(b"j", b"aborted")])
    log.append_marker(7, 0, False, now_ms=1000)
    put(log, [(b"k", b"plain"), (b"j", b"plain")])
    log.roll()


def markers(log: SegmentedLog) -> list[int]:
    return [h[0] for h in headers(log) if h[1]]


def test_markers_go_once_their_records_are_gone_and_delete_retention_has_passed() -> None:
    log = MemoryLog(COMPACT)
    superseded_transactions(log)
    clean(log)  # removes both transactions' records; this pass read them: markers stay
    assert records(log) == [(4, b"k", b"plain"), (5, b"j", b"plain")]
    assert markers(log) == [1, 3]
    later = 1000 + COMPACT.delete_retention_ms
    clean(log, now_ms=later)  # no batch of theirs left, but delete.retention.ms not past
    assert markers(log) == [1, 3]
    assert log.aborted_transactions(0, log.log_end_offset)
    clean(log, now_ms=later + 1)
    assert markers(log) == []
    assert records(log) == [(4, b"k", b"plain"), (5, b"j", b"plain")]
    assert log.aborted_transactions(0, log.log_end_offset) == []  # no marker to look for
    assert log.last_stable_offset == log.log_end_offset


def test_a_commit_marker_stays_while_a_record_of_its_transaction_does() -> None:
    log = MemoryLog(COMPACT)
    committed_then_aborted(log)  # the committed k at 0 is the latest committed k
    clean(log)
    clean(log, now_ms=1000 + COMPACT.delete_retention_ms + 1)
    assert records(log) == [(0, b"k", b"committed"), (5, b"j", b"plain")]
    assert markers(log) == [1]  # COMMIT kept for k; ABORT (its batch gone) removed
    assert log.aborted_transactions(0, log.log_end_offset) == []
