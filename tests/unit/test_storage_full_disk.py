"""Opening and closing logs on a really full filesystem (issue 28): a small tmpfs, filled.

A broker on a full disk must start, serve reads and refuse writes with KAFKA_STORAGE_ERROR,
as during a running disk-full episode. What start-up writes (rebuilt indexes, the torn tail's
copy aside) and what a clean stop writes (indexes, producer snapshots) must not stop it.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import LogManager
from storage import SegmentLog
from storage.errors import KafkaStorageError

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None,
    reason="mounting a small tmpfs needs root and mount(8)",
)

TS = 1_700_000_000_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_up(disk: Path) -> Path:
    """Zeros until the filesystem has not a page left; the filler, to free it later."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def batch(tag: int) -> bytes:
    return build_batch([(None, b"%d-%d" % (tag, i)) for i in range(5)], timestamp_ms=TS)


def offsets(log: SegmentLog) -> list[int]:
    data = log.read(log.log_start_offset, 1 << 20) if log.log_end_offset else b""
    return [h.base_offset for _, h in iter_batch_headers(data)]


def test_a_crashed_log_opens_on_a_full_disk_cuts_its_torn_tail_and_serves_reads(
    small_disk: Path,
) -> None:
    directory = small_disk / "t-0"
    log = SegmentLog.open(directory, LogConfig())
    for tag in range(10):
        log.append(batch(tag), now_ms=TS)
    log.flush()
    del log  # kill -9: no clean close
    segment = directory / "00000000000000000000.log"
    whole = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(batch(99)[:40])  # a torn write: part of a header
    filler = fill_up(small_disk)

    log = SegmentLog.open(directory, LogConfig())  # used to raise ENOSPC
    kinds = {e.kind: e for e in log.recovery_events}
    assert "not saved aside" in kinds["truncated"].detail  # no room for the copy: cut all the same
    assert "not saved" in kinds["index_rebuilt"].detail
    assert segment.stat().st_size == whole
    assert offsets(log) == list(range(0, 50, 5))  # every whole batch is served
    with pytest.raises(KafkaStorageError):
        for tag in range(10, 1000):  # the last page may hold a few
            log.append(batch(tag), now_ms=TS)
    filler.unlink()
    log.append(batch(1000), now_ms=TS)  # writes resume by themselves
    end = log.log_end_offset
    log.close()
    assert SegmentLog.open(directory, LogConfig()).log_end_offset == end


def test_logs_close_on_a_full_disk_and_come_back_whole(small_disk: Path) -> None:
    logs = LogManager(small_disk / "data")
    logs.create_topic("t", 3)
    for p in range(3):
        plog = logs.log("t", p)
        assert plog is not None
        for tag in range(20):
            plog.append(batch(tag), now_ms=TS)
    fill_up(small_disk)
    with capture_logs() as events:
        logs.close()  # no room for the indexes: every log closes all the same
    [said] = [e for e in events if e["event"].startswith("logs not closed cleanly")]
    assert said["logs"] >= 1 and said["error"] == os.strerror(errno.ENOSPC)
    (small_disk / "filler").unlink()
    logs = LogManager(small_disk / "data")  # those not marked clean are checked
    for p in range(3):
        plog = logs.log("t", p)
        assert plog is not None and plog.log_end_offset == 100
