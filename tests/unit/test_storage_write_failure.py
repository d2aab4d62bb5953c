"""A failed disk write (ENOSPC, EIO) leaves the log exactly as it was before it.

The failure is injected at the one system call that writes segment bytes: the first `os.write`
of an append stores part of the batch and the next one fails, as a filling disk does.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import SegmentLog
from storage import segment as segment_module
from storage.errors import KafkaStorageError

TS = 1_700_000_000_000


def batch(n: int, tag: bytes) -> bytes:
    return build_batch([(None, tag + b"-%d" % i) for i in range(n)], timestamp_ms=TS)


class FillingDisk:
    """`os.write` for segment files that stores half of what it is given, then ENOSPC."""

    def __init__(self) -> None:
        self.full = False
        self._real = os.write

    def __call__(self, fd: int, data: memoryview | bytes) -> int:
        if not self.full:
            return self._real(fd, data)
        # Part of the batch reaches the file before the disk is full (what the next call
        # would report is raised straight away).
        self._real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[FillingDisk]:
    fake = FillingDisk()
    monkeypatch.setattr(segment_module.os, "write", fake)
    yield fake


def stored(log: SegmentLog) -> list[tuple[int, int]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for _, h in iter_batch_headers(data):
            out.append((h.base_offset, h.last_offset))
            offset = h.last_offset + 1
    return out


def test_a_failed_append_leaves_the_log_as_it_was(tmp_path: Path, disk: FillingDisk) -> None:
    log = SegmentLog.open(tmp_path / "t-0", LogConfig())
    log.append(batch(5, b"a"), now_ms=TS)
    size = os.path.getsize(log.directory / "00000000000000000000.log")
    disk.full = True
    with pytest.raises(KafkaStorageError) as failed:
        log.append(batch(5, b"b"), now_ms=TS)
    assert failed.value.error_code == 56  # KAFKA_STORAGE_ERROR
    assert os.path.getsize(log.directory / "00000000000000000000.log") == size
    assert log.log_end_offset == 5
    assert stored(log) == [(0, 4)]  # reads go on

    disk.full = False  # space is back: writes resume by themselves
    assert log.append(batch(3, b"c"), now_ms=TS).base_offset == 5
    log.append(batch(2, b"d"), now_ms=TS)
    # Crash (no clean close): recovery finds every acknowledged batch and nothing to cut.
    reopened = SegmentLog.open(tmp_path / "t-0", LogConfig())
    assert not [e for e in reopened.recovery_events if e.kind == "truncated"]
    assert stored(reopened) == [(0, 4), (5, 7), (8, 9)]


def test_failures_are_logged_once_per_episode(tmp_path: Path, disk: FillingDisk) -> None:
    log = SegmentLog.open(tmp_path / "t-0", LogConfig())
    with capture_logs() as logs:
        disk.full = True
        for _ in range(3):
            with pytest.raises(KafkaStorageError):
                log.append(batch(5, b"x"), now_ms=TS)
        disk.full = False
        log.append(batch(1, b"y"), now_ms=TS)
        log.append(batch(1, b"z"), now_ms=TS)
    levels = [(e["log_level"], e["event"].split(";")[0]) for e in logs]
    assert levels == [("error", "log write failed"), ("info", "log writes resumed")]


def test_a_failed_roll_leaves_the_active_segment_serving(
    tmp_path: Path, disk: FillingDisk, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200))
    log.append(batch(5, b"a"), now_ms=TS)
    real_fsync = os.fsync

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)  # sealing writes indexes: they fail too
    with pytest.raises(KafkaStorageError):
        log.append(batch(5, b"b"), now_ms=TS)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert not list((tmp_path / "t-0").glob("*.tmp"))  # no half-written index copies left
    log.append(batch(5, b"c"), now_ms=TS)
    reopened = SegmentLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200))
    assert stored(reopened) == [(0, 4), (5, 9)]
