"""Every reader of a log steps over damage, not only Fetch and ShareFetch (issue 28).

A damaged batch that a read meets is recorded once and read as its stand-in (an empty batch
over its offsets). These are the other readers: ListOffsets by timestamp (the time index names
the damaged batch: the answer is the next intact record at or after the time, as Kafka's
search goes on to the next batch), ListOffsets MAX_TIMESTAMP (the damaged batch held the
largest timestamp: the answer comes from the intact ones), the producer-state rebuild at open
(its snapshot ends inside the damage), the log cleaner (a damaged header in a segment it
cleans: recorded once, and the segment is not planned again), and the offline tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import SegmentLog
from storage.cleaner import SegmentDamaged
from storage.cleaner import plan_cleaning
from storage.cleaner import record_found_damage
from storage.cleaner import run_cleaning
from storage.errors import CorruptRecords
from storage.segment_log import PRODUCER_SNAPSHOT

TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)
DAMAGE = "damaged record batches stepped over"


def stamp(i: int) -> int:
    """Batch i's timestamp: 10 ms apart, but batch 40 (in a sealed segment) holds the largest."""
    return TS + 100_000 if i == 40 else TS + 10 * i


def make_log(directory: Path, config: LogConfig = CONFIG, keyed: bool = False) -> list[int]:
    """90 batches of 3 records (batch i at offsets 3i..3i+2); the segment bases."""
    log = SegmentLog.open(directory, config)
    for i in range(90):
        key = b"k%d" % (i % 5) if keyed else None
        records = [NewRecord(key, b"v%03d-%d" % (i, j), (), stamp(i)) for j in range(3)]
        log.append(build_batch(records, timestamp_ms=stamp(i)), now_ms=TS)
    bases = [s.base_offset for s in log.segments]
    log.close()
    return bases


def locate(directory: Path, offset: int, bases: list[int]) -> tuple[Path, int]:
    """The segment file and position of the batch at `offset`."""
    base = max(b for b in bases if b <= offset)
    path = directory / f"{base:020d}.log"
    for pos, header in iter_batch_headers(path.read_bytes()):
        if header.base_offset == offset:
            return path, pos
    raise AssertionError(offset)


def flip(path: Path, at: int, n: int = 16) -> None:
    data = bytearray(path.read_bytes())
    data[at : at + n] = bytes(b ^ 0xFF for b in data[at : at + n])
    path.write_bytes(bytes(data))


def test_list_offsets_by_time_answers_the_next_intact_record(tmp_path: Path) -> None:
    bases = make_log(tmp_path)
    path, at = locate(tmp_path, 3 * 20, bases)  # batch 20, in a sealed segment
    flip(path, at + 70)  # its records: the CRC fails
    log = SegmentLog.open(tmp_path, CONFIG)
    with capture_logs() as logs:
        assert log.offset_for_timestamp(stamp(20)) == (3 * 21, stamp(21))
        assert log.offset_for_timestamp(stamp(20)) == (3 * 21, stamp(21))
        assert log.offset_for_timestamp(stamp(19) + 1) == (3 * 21, stamp(21))
        assert log.offset_for_timestamp(stamp(19)) == (3 * 19, stamp(19))
    assert [e["offsets"] for e in logs if e["event"] == DAMAGE] == [[60, 62]]


def max_timestamp(log: SegmentLog) -> tuple[int, int] | None:
    """What the ListOffsets handler does for MAX_TIMESTAMP (without its awaits)."""
    for _ in range(8):
        for _ in log.learn_data_max():
            pass
        try:
            return log.offset_for_max_timestamp()
        except CorruptRecords:
            continue
    raise AssertionError("no answer")


def test_list_offsets_max_timestamp_answers_from_intact_batches(tmp_path: Path) -> None:
    bases = make_log(tmp_path)
    log = SegmentLog.open(tmp_path, CONFIG)
    assert max_timestamp(log) == (3 * 40, stamp(40))
    log.close()
    path, at = locate(tmp_path, 3 * 40, bases)
    flip(path, at + 70)
    log = SegmentLog.open(tmp_path, CONFIG)
    with capture_logs() as logs:
        assert max_timestamp(log) == (3 * 89, stamp(89))
        assert max_timestamp(log) == (3 * 89, stamp(89))
    assert [e["offsets"] for e in logs if e["event"] == DAMAGE] == [[120, 122]]


def test_the_producer_state_rebuild_at_open_steps_over_damage(tmp_path: Path) -> None:
    """The snapshot covers the log up to a segment's base; that segment's first batch is
    damaged: the walk of what the snapshot does not cover steps over it (open used to raise)."""
    bases = make_log(tmp_path)
    log = SegmentLog.open(tmp_path, CONFIG)
    snapshot = log._producers.to_json(bases[2])  # as written when that segment was rolled
    log.close()
    (tmp_path / PRODUCER_SNAPSHOT).write_bytes(snapshot)
    (tmp_path / ".clean_shutdown").unlink()  # the snapshot is read as after a crash
    path, at = locate(tmp_path, bases[2], bases)
    flip(path, at + 70)
    (tmp_path / f"{bases[2]:020d}.index").unlink()  # found at open: the segment is scanned
    with capture_logs() as logs:
        log = SegmentLog.open(tmp_path, CONFIG)
    assert [e["offsets"] for e in logs if e["event"] == DAMAGE] == [[bases[2], bases[2] + 2]]
    assert log.log_end_offset == 270


def test_the_cleaner_records_a_damaged_header_once_and_cleans_around_it(
    tmp_path: Path,
) -> None:
    compact = LogConfig(
        segment_bytes=2000, index_interval_bytes=200, cleanup_policy="compact",
        min_cleanable_dirty_ratio=0.0,
    )  # fmt: skip
    bases = make_log(tmp_path, compact, keyed=True)
    path, at = locate(tmp_path, bases[2] + 9, bases)
    data = bytearray(path.read_bytes())
    data[at + 16] = 7  # a wrong magic byte: the header does not parse
    path.write_bytes(bytes(data))
    log = SegmentLog.open(tmp_path, compact)
    job = plan_cleaning(log, TS + 10**9, None, 0)
    assert job is not None and bases[2] in [s.base_offset for s in job.segments]
    with pytest.raises(SegmentDamaged) as found:
        run_cleaning(job)
    assert (found.value.position, found.value.reason) == (at, "magic")
    with capture_logs() as logs:
        record_found_damage(found.value)  # on the event loop, as the broker's duty does
        record_found_damage(found.value)
    assert [e["offsets"] for e in logs if e["event"] == DAMAGE] == [[bases[2] + 9, bases[2] + 11]]
    again = plan_cleaning(log, TS + 10**9, None, 0)
    assert again is not None
    assert [s.base_offset for s in again.segments] == bases[:2]  # stops before the damage
    run_cleaning(again)  # the segments before it clean as ever
