"""Transactions in a partition log: markers, the last stable offset and the aborted index,
kept across a clean restart and rebuilt after a crash (Kafka's `ProducerStateManager`
ongoing transactions, `TransactionIndex`, and `LogLoader` rebuilding both from the log)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.txn_markers import marker_type
from storage import LogConfig
from storage import SegmentLog
from storage.producer_state import AbortedTxn
from storage.producer_state import ProducerStateManager

TS = 1_700_000_000_000
# Small segments: the appends below roll several, so a crash leaves a snapshot older than them.
CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100)


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0) -> bytes:
    records = [(None, b"v%d-%d" % (pid, seq + i)) for i in range(n)]
    return build_batch(
        records, timestamp_ms=TS, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        attributes=TRANSACTIONAL_MASK,
    )  # fmt: skip


def plain(n: int = 1) -> bytes:
    return build_batch([(None, b"plain")] * n, timestamp_ms=TS)


def scenario(log: SegmentLog) -> tuple[int, list[AbortedTxn]]:
    """Producer 7 commits, producer 8 aborts, producer 9 stays open; returns the first offset
    of 9's transaction and the aborted index expected."""
    a = log.append(txn_batch(7, 0), now_ms=TS).base_offset
    b = log.append(txn_batch(8, 0), now_ms=TS).base_offset
    log.append(plain(3), now_ms=TS)
    log.append(txn_batch(7, 2), now_ms=TS)
    assert log.last_stable_offset == a
    log.append_marker(7, 0, True, now_ms=TS)
    assert log.last_stable_offset == b
    abort = log.append_marker(8, 0, False, now_ms=TS).base_offset
    c = log.append(txn_batch(9, 0), now_ms=TS).base_offset
    log.append(plain(2), now_ms=TS)
    return c, [AbortedTxn(8, b, abort)]


def test_markers_move_the_last_stable_offset_and_record_aborts(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    open_at, aborted = scenario(log)
    assert log.last_stable_offset == open_at < log.log_end_offset
    assert log.aborted_transactions(0, log.log_end_offset) == aborted
    # Reads from after the aborted transaction's marker do not need it.
    assert log.aborted_transactions(aborted[0].last_offset + 1, log.log_end_offset) == []
    assert log.aborted_transactions(0, aborted[0].first_offset) == []
    log.append_marker(9, 0, True, now_ms=TS)
    assert log.last_stable_offset == log.log_end_offset


def test_a_marker_is_a_control_batch_with_its_type_in_its_key(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    offset = log.append_marker(5, 3, False, now_ms=TS).base_offset
    data = log.read(offset, 1 << 16)
    ((_, header),) = iter_batch_headers(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 3, -1)
    assert marker_type(data) == 0  # ABORT; COMMIT is 1 (Kafka's ControlRecordType)


@pytest.mark.parametrize("crash", [False, True])
def test_open_and_aborted_transactions_survive_a_restart(tmp_path: Path, crash: bool) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    open_at, aborted = scenario(log)
    if crash:
        log.flush()
        del log  # kill -9: the snapshot predates the markers; the log alone rebuilds them
    else:
        log.close()
    log = SegmentLog.open(tmp_path, CONFIG)
    assert log.last_stable_offset == open_at
    assert log.aborted_transactions(0, log.log_end_offset) == aborted
    log.append_marker(9, 0, False, now_ms=TS)
    assert log.last_stable_offset == log.log_end_offset


def test_a_fencing_marker_starts_the_producers_new_epoch(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    log.append(txn_batch(4, 0, epoch=0), now_ms=TS)
    log.append_marker(4, 1, False, now_ms=TS)  # the coordinator aborted it under epoch 1
    with pytest.raises(Exception, match="epoch"):
        log.append(txn_batch(4, 2, epoch=0), now_ms=TS)  # the zombie's next batch
    log.append(txn_batch(4, 0, epoch=1), now_ms=TS)  # the new epoch starts at sequence 0


def test_a_transactional_batch_must_be_alone_in_its_records(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    with pytest.raises(InvalidRecordBatch, match="alone"):
        log.append(plain() + txn_batch(3, 0), now_ms=TS)
    assert log.last_stable_offset == log.log_end_offset == 0


def test_retention_forgets_aborted_transactions_below_the_log_start(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    log.append(txn_batch(8, 0), now_ms=TS)
    log.append_marker(8, 0, False, now_ms=TS)
    for _ in range(12):
        log.append(plain(2), now_ms=TS)
    assert len(log.aborted_transactions(0, log.log_end_offset)) == 1
    log.advance_log_start(log.log_end_offset - 1)
    log.apply_retention(TS)
    assert log.aborted_transactions(0, log.log_end_offset) == []


def test_aborted_between_finds_what_a_whole_scan_finds() -> None:
    """The scan stops at `upper` plus the longest aborted transaction (so a read near the start
    of a long index does not walk all of it); it must still find every aborted transaction a
    read of [start, upper) meets, as a walk of the whole index does (Kafka's
    `TransactionIndex.collectAbortedTxns`), also after a snapshot round trip and the cleaner."""
    rng = random.Random(34)
    state = ProducerStateManager()
    offset = 0
    for _ in range(400):  # interleaved transactions of 6 producers, some long, most short
        producer = rng.randrange(6)
        if producer in state.ongoing:
            state.end_txn(producer, 0, rng.random() < 0.3, offset)
        else:
            state.ongoing[producer] = offset
        offset += rng.choice((1, 1, 2, 40))

    def whole(s: ProducerStateManager, start: int, upper: int) -> list[AbortedTxn]:
        return [a for a in s.aborted if a.last_offset >= start and a.first_offset < upper]

    restored, _ = ProducerStateManager.from_json(state.to_json(offset))
    cleaned, _ = ProducerStateManager.from_json(state.to_json(offset))
    cleaned.forget_aborted([(a.producer_id, a.last_offset) for a in cleaned.aborted[::3]])
    assert len(state.aborted) > 20
    for _ in range(500):
        start = rng.randrange(offset)
        upper = start + rng.randrange(1, 200)
        for s in (state, restored, cleaned):
            assert s.aborted_between(start, upper) == whole(s, start, upper)
