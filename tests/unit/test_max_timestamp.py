"""ListOffsets MAX_TIMESTAMP on the log: the first data record with the largest timestamp,
never a control batch (share state carries the broker's clock), in memory and on disk, before
and after a clean or unclean restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key
from storage import LogConfig
from storage import MemoryLog
from storage import SegmentLog
from storage import segment as segment_module
from storage.base_log import SegmentedLog
from storage.segment import DATA_MAX_SUFFIX
from storage.segment import FileSegment
from storage.segment_log import CLEAN_SHUTDOWN

TS = 1_700_000_000_000
# Small segments: the maximum lies in a sealed segment, behind control batches.
CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100)


def data(*stamps: int) -> bytes:
    """One uncompressed batch, one record per timestamp (in the order given)."""
    records = [NewRecord(b"k", b"v" * 20, (), ts) for ts in stamps]
    return build_batch(records, timestamp_ms=min(stamps))


def control(ts: int) -> bytes:
    return build_control_batch(0, -1, -1, ts, [(control_record_key(6), b"share delta")])


def fill(log: SegmentedLog) -> None:
    """Out-of-order data with the maximum (TS + 900, offset 4) in the middle of a batch, and
    control batches with later timestamps after it and in every segment."""
    log.append(data(TS + 100, TS + 50), now_ms=TS)  # 0, 1
    log.append_control(control(TS + 5_000), now_ms=TS)  # 2
    log.append(data(TS + 300, TS + 900, TS + 200, TS + 900), now_ms=TS)  # 3..6: 4 wins
    log.append_control(control(TS + 6_000), now_ms=TS)  # 7
    for i in range(6):
        log.append(data(TS + 400 + i), now_ms=TS)
        log.append_control(control(TS + 7_000 + i), now_ms=TS)


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_the_largest_data_timestamp_wins_over_later_control_batches(
    kind: str, tmp_path: Path
) -> None:
    log: SegmentedLog = MemoryLog(CONFIG) if kind == "memory" else SegmentLog.open(tmp_path, CONFIG)
    assert log.offset_for_max_timestamp() is None  # empty: Kafka's -1 / -1
    log.append_control(control(TS), now_ms=TS)
    assert log.offset_for_max_timestamp() is None  # control records only
    fill(log)
    assert len(log.segments) > 3
    assert log.offset_for_max_timestamp() == (5, TS + 900)  # 4, after the first control


@pytest.mark.parametrize("clean", [True, False])
def test_the_answer_survives_a_restart(tmp_path: Path, clean: bool) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log)
    expected = log.offset_for_max_timestamp()
    log.close()
    if not clean:
        (tmp_path / CLEAN_SHUTDOWN).unlink()
    again = SegmentLog.open(tmp_path, CONFIG)
    # After a clean close the saved maxima are read at open (no walk); after a crash the
    # active segment is scanned whole and the sealed ones read theirs.
    assert all(s.data_max_known for s in again.segments)
    assert again.offset_for_max_timestamp() == expected == (4, TS + 900)
    # A later, larger data timestamp in the active segment takes over.
    again.append(data(TS + 950), now_ms=TS)
    again.append_control(control(TS + 9_000), now_ms=TS)
    end = again.log_end_offset
    assert again.offset_for_max_timestamp() == (end - 2, TS + 950)
    again.close()
    assert SegmentLog.open(tmp_path, CONFIG).offset_for_max_timestamp() == (end - 2, TS + 950)


def test_a_segment_saved_before_the_maximum_was_kept_is_walked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data dir written by an older Shoal has no saved maximum: the first ask walks the
    segment's headers, in slices the broker runs between awaits, and the answer is the same."""
    monkeypatch.setattr(segment_module, "WALK_SLICE_BATCHES", 2)
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log)
    log.close()
    saved = list(tmp_path.glob(f"*{DATA_MAX_SUFFIX}"))
    assert saved  # segments whose last timestamp is a control batch's
    for path in saved:
        path.unlink()
    again = SegmentLog.open(tmp_path, CONFIG)
    assert not all(s.data_max_known for s in again.segments)
    assert len(list(again.learn_data_max())) >= 2  # slices of the walk
    assert again.offset_for_max_timestamp() == (4, TS + 900)
    assert all(s.data_max_known for s in again.segments)


def test_a_segment_opened_over_existing_bytes_learns_its_maximum(tmp_path: Path) -> None:
    """A FileSegment made over a file nobody tracked (as a cleaned copy swapped in whole)
    learns its data maximum when asked, not -1."""
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log)
    log.close()
    first = FileSegment(tmp_path, 0, CONFIG.index_interval_bytes)
    assert first.data_max() == (TS + 900, 3)
    first.close()
