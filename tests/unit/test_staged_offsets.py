"""Offsets staged by transactions coordinated by another process (`--processes N`,
`coordinator/staged_offsets.py`): written to this process's offsets log as transactional
batches of the producer, committed by a COMMIT marker of the same epoch, dropped by ABORT, and
replayed the same way after a restart and after the log is cleaned (Kafka's group coordinator:
`GroupMetadataManager.storeOffsets` with a producer id, `handleTxnCompletion`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.offset_store import OffsetStore
from protocol.consumer_offsets import OffsetValue
from storage.cleaner import plan_cleaning
from storage.cleaner import run_cleaning
from storage.cleaner import swap_in
from storage.config import LogConfig
from storage.errors import InvalidProducerEpoch
from storage.log_manager import LogManager
from storage.segment_log import SegmentLog
from storage.topics import CONSUMER_OFFSETS
from tests.unit.test_offset_store import now
from tests.unit.test_offset_store import open_store


def test_staged_offsets_commit_with_their_marker_and_abort_without_it(tmp_path: Path) -> None:
    logs, store = open_store(tmp_path)
    store.commit("g", {("t", 0): OffsetValue(5)})
    store.stage_txn(7, 0, "g", {("t", 0): OffsetValue(10), ("t", 1): OffsetValue(11)})
    store.stage_txn(7, 0, "g", {("t", 2): OffsetValue(12)})  # a second TxnOffsetCommit
    store.stage_txn(8, 3, "h", {("t", 0): OffsetValue(99)})
    assert store.fetch("g", "t", 0) == OffsetValue(5)  # not before the marker
    assert store.staged.has_pending("g", ("t", 1)) and store.staged.has_pending("h", ("t", 0))
    store.end_txn(7, 0, commit=True)
    store.end_txn(8, 3, commit=False)
    assert store.group_offsets("g") == {
        ("t", 0): OffsetValue(10), ("t", 1): OffsetValue(11), ("t", 2): OffsetValue(12)
    }  # fmt: skip
    assert not store.has_group("h") and len(store.staged) == 0
    store.stage_txn(7, 0, "g", {("t", 0): OffsetValue(20)})  # open at the kill
    logs.close()
    logs, again = open_store(tmp_path)
    assert again.group_offsets("g") == store.group_offsets("g") and not again.has_group("h")
    assert again.staged.epoch(7) == 0  # still staged: its marker comes after the restart
    again.end_txn(7, 0, commit=True)
    assert again.fetch("g", "t", 0) == OffsetValue(20)
    logs.close()


def test_offsets_staged_under_a_fenced_epoch_are_never_committed(tmp_path: Path) -> None:
    """A fencing abort (epoch 1) written before a TxnOffsetCommit of epoch 0 verified before
    it: the late batch is refused by the log (the producer's epoch here is 1), and offsets
    staged under an older epoch are not committed by a later epoch's COMMIT marker."""
    logs, store = open_store(tmp_path)
    store.end_txn(7, 1, commit=False)  # nothing staged: the marker is written all the same
    with pytest.raises(InvalidProducerEpoch):
        store.stage_txn(7, 0, "g", {("t", 0): OffsetValue(10)})
    assert len(store.staged) == 0
    store.staged.stage(8, 0, "g", {("t", 0): OffsetValue(10)})  # as if written before
    store.end_txn(8, 1, commit=True)
    assert store.fetch("g", "t", 0) is None
    logs.close()


def test_cleaning_the_offsets_log_keeps_committed_transactional_offsets(tmp_path: Path) -> None:
    config = LogConfig(min_cleanable_dirty_ratio=0.0, delete_retention_ms=0)
    logs = LogManager(tmp_path, config)
    log = logs.internal_log(CONSUMER_OFFSETS, {"cleanup.policy": "compact", "segment.bytes": "300"})
    store = OffsetStore(log, now)
    for i in range(10):
        store.stage_txn(7, 0, "g", {("t", i % 2): OffsetValue(i)})
        store.end_txn(7, 0, commit=i % 3 != 0)
    for i in range(6):  # seal the segments above
        store.commit("other", {("t", 9): OffsetValue(i)})
    expected = store.group_offsets("g")
    assert expected == {("t", 0): OffsetValue(8), ("t", 1): OffsetValue(7)}
    assert isinstance(log, SegmentLog)
    job = plan_cleaning(log, 10_000, None, 0)
    assert job is not None
    swap_in(run_cleaning(job))
    logs.close()
    logs, again = open_store(tmp_path, config)
    assert again.group_offsets("g") == expected and len(again.staged) == 0
    logs.close()
