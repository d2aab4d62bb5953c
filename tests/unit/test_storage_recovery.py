"""SegmentLog on disk: restart, crash, torn and corrupt tails, lost indexes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import OutOfOrderSequence
from storage import SegmentLog
from storage.index import IndexCorrupt
from storage.index import OffsetIndex
from storage.index import TimeIndex

TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=120)


def batch(n: int = 2, *, pid: int = -1, seq: int = -1, tag: int = 0) -> bytes:
    records = [(b"k%d" % i, b"value-%d-%d" % (tag, i)) for i in range(n)]
    return build_batch(
        records, timestamp_ms=TS + tag, producer_id=pid, producer_epoch=0, base_sequence=seq
    )


def fill(log: SegmentLog, count: int, start_tag: int = 0) -> None:
    for tag in range(start_tag, start_tag + count):
        log.append(batch(1 + tag % 3, tag=tag), now_ms=TS)


def dump(log: SegmentLog) -> list[bytes]:
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, h in iter_batch_headers(data):
            out.append(data[pos : pos + h.size])
            offset = h.last_offset + 1
    return out


def last_segment(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


def test_close_and_reopen_keeps_everything(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log, 30)
    before, end = dump(log), log.log_end_offset
    log.close()
    assert (tmp_path / ".clean_shutdown").exists()
    assert (tmp_path / "00000000000000000000.log").exists()
    assert (tmp_path / "00000000000000000000.index").exists()
    assert (tmp_path / "00000000000000000000.timeindex").exists()
    log = SegmentLog.open(tmp_path, CONFIG)
    assert not (tmp_path / ".clean_shutdown").exists()
    assert log.recovery_events == []
    assert (dump(log), log.log_end_offset) == (before, end)
    assert log.offset_for_timestamp(TS + 29) is not None
    assert log.append(batch(1), now_ms=TS).base_offset == end


@pytest.mark.parametrize("flush", [True, False])
def test_reopen_after_kill_keeps_flushed_data(tmp_path: Path, flush: bool) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log, 25)
    if flush:
        log.flush()
    before, end = dump(log), log.log_end_offset
    del log  # no close: like kill -9 (the page cache still holds unflushed writes)
    log = SegmentLog.open(tmp_path, CONFIG)
    assert (dump(log), log.log_end_offset) == (before, end)
    # The active segment was checked whole; its indexes are rebuilt in memory and saved when
    # it is sealed or closed, as after any append.
    assert log.recovery_events == []
    assert log.recovery_stats.segments_scanned == 1


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_damaged_tail_is_truncated_and_saved_aside(tmp_path: Path, damage: str) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log, 20)
    log.flush()
    before = dump(log)
    del log
    path = last_segment(tmp_path)
    data = path.read_bytes()
    last_size = len(before[-1])
    assert data.endswith(before[-1])
    if damage == "cut":
        with path.open("r+b") as f:
            f.truncate(len(data) - last_size // 2)
        cut = data[len(data) - last_size : len(data) - last_size // 2]
    else:
        with path.open("r+b") as f:
            f.seek(len(data) - 5)
            f.write(bytes([data[-5] ^ 0x40]))
        cut = data[len(data) - last_size : -5] + bytes([data[-5] ^ 0x40]) + data[-4:]
    log = SegmentLog.open(tmp_path, CONFIG)
    assert dump(log) == before[:-1]
    assert path.stat().st_size == len(data) - last_size
    (aside,) = tmp_path.glob(path.name + ".corrupt-*")
    assert aside.read_bytes() == cut
    kinds = [e.kind for e in log.recovery_events]
    assert kinds[0] == "truncated"
    assert ("crc" if damage == "flip" else "truncated") in log.recovery_events[0].detail
    end = log.log_end_offset
    assert log.append(batch(1), now_ms=TS).base_offset == end
    log.close()
    assert SegmentLog.open(tmp_path, CONFIG).log_end_offset == end + 1


def test_damage_in_a_sealed_segment_at_open_costs_only_the_damaged_batch(
    tmp_path: Path,
) -> None:
    """Its index lost too, the segment is scanned at open: the bad batch is stepped over and
    no later batch or segment is lost (they all used to be deleted)."""
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log, 40)
    log.flush()
    segments = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    assert len(segments) >= 4
    del log
    second = sorted(tmp_path.glob("*.log"))[1]
    (tmp_path / second.name.replace(".log", ".index")).unlink()  # forces its scan
    with second.open("r+b") as f:
        f.seek(30)  # inside the first batch's CRC-covered bytes
        byte = f.read(1)
        f.seek(30)
        f.write(bytes([byte[0] ^ 1]))
    log = SegmentLog.open(tmp_path, CONFIG)
    assert [s.base_offset for s in log.segments] == segments
    assert log.log_end_offset == end
    assert "segment_deleted" not in [e.kind for e in log.recovery_events]
    # Its offsets read as a stand-in: an empty batch over them, which readers step over.
    # The same read goes on past it with the batches after it (issue 29).
    (_, damaged), (_, after), *_ = iter_batch_headers(log.read(segments[1], 1 << 20))
    assert (damaged.base_offset, damaged.record_count) == (segments[1], 0)
    assert (after.base_offset, after.record_count > 0) == (damaged.last_offset + 1, True)
    alone = log.read(damaged.last_offset + 1, 1 << 20)  # the batches after it are served
    assert next(iter_batch_headers(alone))[1].base_offset == damaged.last_offset + 1
    assert log.append(batch(1), now_ms=TS).base_offset == end


@pytest.mark.parametrize("how", ["delete", "garbage"])
def test_lost_or_garbled_indexes_are_rebuilt(tmp_path: Path, how: str) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log, 40)
    before, end = dump(log), log.log_end_offset
    log.close()
    for path in [*tmp_path.glob("*.index"), *tmp_path.glob("*.timeindex")]:
        if how == "delete":
            path.unlink()
        else:
            path.write_bytes(b"\x7f" * 13)
    with capture_logs() as said:
        log = SegmentLog.open(tmp_path, CONFIG)
        # Sealed segments' indexes are read when first used (as Kafka's LazyIndex): rebuilt
        # then, one line each.
        assert not log.recovery_events
        assert (dump(log), log.log_end_offset) == (before, end)
    rebuilt = [e["path"] for e in said if e.get("kind") == "index_rebuilt"]
    assert sorted(rebuilt) == [str(s.log_path) for s in log.segments[:-1]]  # type: ignore[attr-defined]
    assert all(len(s.offset_index) for s in log.segments[:-1])
    for offset in range(end):
        (span,) = log.batch_spans(offset, 1)
        assert span.base_offset <= offset <= span.last_offset
    assert (tmp_path / "00000000000000000000.index").stat().st_size > 0


def test_stale_index_pointing_past_the_data_is_rebuilt(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    fill(log, 6)
    log.close()
    seg = tmp_path / "00000000000000000000.log"
    size = seg.stat().st_size
    os.truncate(seg, size - 10)  # data shorter than the index believes, after a clean close
    log = SegmentLog.open(tmp_path, CONFIG)
    assert log.recovery_events[0].kind == "truncated"


def test_producer_state_survives_reopen(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, CONFIG)
    first = log.append(batch(2, pid=4, seq=0), now_ms=TS)
    fill(log, 20)  # rolls several segments, so the snapshot is older than the tail
    log.append(batch(1, pid=4, seq=2), now_ms=TS)
    log.close()
    log = SegmentLog.open(tmp_path, CONFIG)
    again = log.append(batch(2, pid=4, seq=0), now_ms=TS)
    assert again.duplicate and again.base_offset == first.base_offset
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(1, pid=4, seq=9), now_ms=TS)
    log.append(batch(1, pid=4, seq=3), now_ms=TS)
    log.append(batch(1, pid=4, seq=4), now_ms=TS)
    log.flush()
    del log  # crash: the snapshot on disk predates the last appends
    log = SegmentLog.open(tmp_path, CONFIG)
    assert log.append(batch(1, pid=4, seq=3), now_ms=TS).duplicate
    assert log.append(batch(1, pid=4, seq=4), now_ms=TS).duplicate
    assert not log.append(batch(1, pid=4, seq=5), now_ms=TS).duplicate
    (tmp_path / "producer_state.json").unlink()
    log.close()
    (tmp_path / "producer_state.json").write_bytes(b"{not json")
    log = SegmentLog.open(tmp_path, CONFIG)
    assert "snapshot_discarded" in [e.kind for e in log.recovery_events]
    assert log.append(batch(1, pid=4, seq=5), now_ms=TS).duplicate


def test_crash_after_a_clean_restart_still_checks_the_active_segment(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, LogConfig(index_interval_bytes=50))
    fill(log, 10)
    log.close()  # leaves index files for the active segment...
    log = SegmentLog.open(tmp_path, LogConfig(index_interval_bytes=50))
    fill(log, 3, start_tag=10)
    log.flush()
    before = dump(log)
    del log  # ...which are stale when the process dies
    path = last_segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    log = SegmentLog.open(tmp_path, LogConfig(index_interval_bytes=50))
    assert dump(log) == before[:-1]
    assert "crc" in log.recovery_events[0].detail


def test_index_round_trip_and_lookups() -> None:
    offsets = OffsetIndex()
    for i in range(1, 6):
        offsets.append(i * 10, i * 1000)
    loaded = OffsetIndex.from_bytes(offsets.to_bytes(), 10_000)
    assert list(loaded.offsets) == [10, 20, 30, 40, 50]
    assert (loaded.lookup(5), loaded.lookup(10), loaded.lookup(39), loaded.lookup(99)) == (
        0,
        1000,
        3000,
        5000,
    )
    with pytest.raises(IndexCorrupt):
        OffsetIndex.from_bytes(offsets.to_bytes(), 5000)  # points past the segment
    times = TimeIndex()
    for ts, rel in [(100, 0), (90, 3), (200, 5), (300, 9)]:
        times.maybe_append(ts, rel)
    loaded_times = TimeIndex.from_bytes(times.to_bytes())
    assert list(loaded_times.timestamps) == [100, 200, 300]
    assert [loaded_times.scan_start(t) for t in (50, 100, 150, 200, 301)] == [None, None, 0, 0, 9]


def test_delete_removes_directory(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path / "x-0", CONFIG)
    fill(log, 3)
    log.delete()
    assert not (tmp_path / "x-0").exists()
