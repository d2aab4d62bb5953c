"""The log start offset as DeleteRecords moves it: inside a segment, durable, bounding reads.

Run against SegmentLog (disk) and MemoryLog; what only a disk has (reopen, a failed write,
kill -9 between steps) runs against SegmentLog alone.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import MemoryLog
from storage import OffsetOutOfRange
from storage import SegmentLog
from storage import fsutil
from storage.base_log import SegmentedLog
from storage.errors import KafkaStorageError
from storage.segment_log import LOG_START_CHECKPOINT

TS = 1_700_000_000_000
MakeLog = Callable[[], SegmentedLog]
# Three 10-record batches a segment: segments start at 0, 30, 60, ...
SMALL_SEGMENTS = LogConfig(segment_bytes=3 * 400)


def batch(n: int = 10) -> bytes:
    return build_batch([(None, b"v" * 20) for _ in range(n)], timestamp_ms=TS)


def filled(log: SegmentedLog, batches: int = 10) -> SegmentedLog:
    for _ in range(batches):
        log.append(batch(), now_ms=TS)
    return log


@pytest.fixture(params=["disk", "memory"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> MakeLog:
    def make() -> SegmentedLog:
        if request.param == "memory":
            return MemoryLog(SMALL_SEGMENTS)
        return SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS)

    return make


def move(log: SegmentedLog, offset: int, min_retained_offset: int | None = None) -> int:
    target = log.log_start_target(offset)
    log.save_log_start(target)
    log.advance_log_start(target, min_retained_offset)
    return target


def first_offset_read(log: SegmentedLog, offset: int) -> int:
    data = log.read(offset, 1 << 20)
    return next(h for _, h in iter_batch_headers(data)).base_offset


def test_the_log_start_lies_inside_a_segment_and_bounds_reads(make_log: MakeLog) -> None:
    log = filled(make_log())
    assert [s.base_offset for s in log.segments][:3] == [0, 30, 60]
    assert move(log, 45) == 45
    assert log.log_start_offset == 45
    # The segment below is gone, the one holding the start stays (whole batches are served).
    assert log.segments[0].base_offset == 30
    assert first_offset_read(log, 45) == 40
    with pytest.raises(OffsetOutOfRange):
        log.read(44, 1 << 20)
    assert log.append(batch(), now_ms=TS).log_start_offset == 45


def test_minus_one_is_the_log_end_and_past_the_end_is_refused(make_log: MakeLog) -> None:
    log = filled(make_log())
    end = log.log_end_offset
    with pytest.raises(OffsetOutOfRange):
        log.log_start_target(end + 1)
    assert log.log_start_target(-1) == end
    move(log, -1)
    assert log.log_start_offset == end
    assert log.read(end, 1 << 20) == b""  # nothing left to read, and no error
    assert log.segments[-1].base_offset <= end  # the active segment is never deleted


def test_moving_below_the_start_changes_nothing(make_log: MakeLog) -> None:
    log = filled(make_log())
    move(log, 45)
    assert log.log_start_target(10) == 45
    assert move(log, 10) == 45
    assert log.log_start_offset == 45


def test_share_state_holds_segments_but_not_the_log_start(make_log: MakeLog) -> None:
    log = filled(make_log())
    move(log, 75, min_retained_offset=35)
    assert log.log_start_offset == 75
    assert log.segments[0].base_offset == 30  # holds offset 35: kept
    with pytest.raises(OffsetOutOfRange):
        log.read(35, 1 << 20)
    # Once share state no longer needs them, retention's pass deletes them.
    log.apply_retention(TS, None)
    assert log.segments[0].base_offset == 60


def test_timestamp_lookup_never_answers_below_the_start(make_log: MakeLog) -> None:
    log = filled(make_log())
    move(log, 45)
    assert log.offset_for_timestamp(0) == (45, TS)


def test_the_log_start_survives_a_reopen_and_a_kill(tmp_path: Path) -> None:
    log = filled(SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS))
    move(log, 45)
    log.close()
    reopened = SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS)
    assert reopened.log_start_offset == 45
    # No close this time: the file was synced when the start moved.
    move(reopened, 52)
    crashed = SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS)
    assert crashed.log_start_offset == 52
    with pytest.raises(OffsetOutOfRange):
        crashed.read(51, 1 << 20)


def test_an_old_data_dir_without_the_file_opens_as_before(tmp_path: Path) -> None:
    log = filled(SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS))
    log.apply_retention(TS + 10**12, None)  # retention alone: whole segments
    base = log.segments[0].base_offset
    log.close()
    assert not (tmp_path / "t-0" / LOG_START_CHECKPOINT).exists()
    assert SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS).log_start_offset == base


def test_the_start_is_never_below_the_first_segment_nor_past_the_end(tmp_path: Path) -> None:
    log = filled(SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS))
    move(log, 45)
    log.apply_retention(TS + 10**12, None)  # whole segments up to the active one go
    base = log.segments[0].base_offset
    log.close()
    assert SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS).log_start_offset == base
    (tmp_path / "t-0" / LOG_START_CHECKPOINT).write_text("0\n100000\n")
    reopened = SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS)
    assert reopened.log_start_offset == reopened.log_end_offset
    assert any(e.kind == "log_start_lowered" for e in reopened.recovery_events)


def test_an_unreadable_file_is_reported_and_the_first_segment_rules(tmp_path: Path) -> None:
    log = filled(SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS))
    move(log, 45)
    log.close()
    (tmp_path / "t-0" / LOG_START_CHECKPOINT).write_text("garbage")
    reopened = SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS)
    assert reopened.log_start_offset == 30
    assert any(e.kind == "log_start_discarded" for e in reopened.recovery_events)


def test_a_failed_write_answers_storage_error_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = filled(SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS))
    move(log, 45)
    segments = [s.base_offset for s in log.segments]

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fsutil.os, "fsync", no_space)
    with pytest.raises(KafkaStorageError):
        log.save_log_start(log.log_start_target(75))
    monkeypatch.undo()
    assert log.log_start_offset == 45
    assert [s.base_offset for s in log.segments] == segments
    assert not list((tmp_path / "t-0").glob("*.tmp"))
    log.close()
    assert SegmentLog.open(tmp_path / "t-0", SMALL_SEGMENTS).log_start_offset == 45
