"""The periodic flush: dirty flags cleared before the fsync (which runs in another thread),
and a segment deleted meanwhile is not synced at all (no descriptor of another file is).

`os.fsync` is replaced by a recorder: a fake of the OS call, so the test sees which file each
sync reached and can interleave appends with a sync that has started.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.record_batch import build_batch
from storage import LogConfig
from storage import SegmentLog
from storage.segment import sync_all

Synced = list[tuple[int, int]]  # (device, inode) of every file an fsync reached


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Synced:
    seen: Synced = []
    real: Callable[[int], None] = os.fsync

    def recording_fsync(fd: int) -> None:
        st = os.fstat(fd)
        seen.append((st.st_dev, st.st_ino))
        real(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return seen


def _inode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino)


def _append(log: SegmentLog) -> None:
    log.append(build_batch([(None, b"x")], timestamp_ms=1), now_ms=1)


def test_an_append_during_a_flush_stays_dirty_and_is_synced_next_time(
    tmp_path: Path, synced: Synced
) -> None:
    log = SegmentLog.open(tmp_path / "p-0", LogConfig())
    segment = log.segments[-1]
    _append(log)
    pending = log.start_flush()
    assert len(pending) == 1 and not segment.dirty  # cleared before the sync starts
    _append(log)  # the loop appends while the flush thread has not synced yet
    assert sync_all(pending) == []
    assert segment.dirty  # the second append is not covered by that sync
    again = log.start_flush()
    assert len(again) == 1 and sync_all(again) == []
    assert not segment.dirty and log.start_flush() == []
    assert synced == [_inode(segment.log_path)] * 2  # type: ignore[attr-defined]
    log.close()


def test_a_segment_deleted_during_its_flush_never_syncs_a_reused_descriptor(
    tmp_path: Path, synced: Synced
) -> None:
    log = SegmentLog.open(tmp_path / "p-0", LogConfig())
    _append(log)
    deleted = _inode(log.segments[-1].log_path)  # type: ignore[attr-defined]
    pending = log.start_flush()
    log.delete()  # topic deletion while the flush thread waits
    # The descriptor number the segment had is free again: another file takes it.
    with (tmp_path / "other").open("wb") as other:
        assert sync_all(pending) == []
        assert synced == []  # the file is gone: nothing to sync, and nothing else synced
        assert deleted not in synced and _inode(tmp_path / "other") not in synced
        assert other.fileno() >= 0


def test_a_failed_sync_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SegmentLog.open(tmp_path / "p-0", LogConfig())
    _append(log)
    pending = log.start_flush()

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    [(failed, error)] = sync_all(pending)
    assert failed.segment is log.segments[-1] and error.errno == 5
    monkeypatch.undo()
    log.close()
