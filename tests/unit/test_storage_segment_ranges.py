"""Segments lost, cut or overlapping are found at open, said once and counted (issue 28).

Deleting a middle `.log` used to lose its records with no log line at all; cutting one at a
batch boundary said only `index_rebuilt`. At open the segments' offset ranges are now checked
against each other, from what open already knows (each file's base offset, each segment's end
from its index and tail): a gap is logged once with the offsets no file holds and counted
(`missing_records`), and every other offset is still served. A segment whose first batches
claim offsets the segment before it holds (an overlap) has those batches treated as damage:
each offset is served once, from the earlier segment, as within a segment, where a batch whose
base offset does not follow the one before is damage. Kafka's `LogLoader` opens each segment at
the base offset its file name gives and checks sealed segments no further.
"""

from __future__ import annotations

import os
from pathlib import Path

from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import SegmentLog
from tests.unit.test_storage_damage import offsets_served

TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)
GAP = "offsets missing between segments"
DAMAGE = "damaged record batches stepped over"


def make_log(directory: Path) -> tuple[list[int], int]:
    """90 batches of 3 records over several segments; (segment bases, log end)."""
    log = SegmentLog.open(directory, CONFIG)
    for i in range(90):
        log.append(
            build_batch([(None, b"v%03d-%d" % (i, j)) for j in range(3)], timestamp_ms=TS),
            now_ms=TS,
        )
    bases, end = [s.base_offset for s in log.segments], log.log_end_offset
    log.close()
    assert len(bases) >= 4
    return bases, end


def segment_file(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / f"{base:020d}{suffix}"


def open_logged(directory: Path) -> tuple[SegmentLog, list[int], list[dict[str, object]]]:
    """Open the log and read it all twice; (log, offsets served, damage and gap lines)."""
    with capture_logs() as logs:
        log = SegmentLog.open(directory, CONFIG)
        got, _ = offsets_served(log, 1 << 20)
        again, _ = offsets_served(log, 500)
    assert got == again
    return log, got, [e for e in logs if e["event"] in (GAP, DAMAGE)]


def test_a_deleted_middle_segment_is_logged_once_and_counted(tmp_path: Path) -> None:
    bases, end = make_log(tmp_path)
    segment_file(tmp_path, bases[1]).unlink()

    log, got, lines = open_logged(tmp_path)
    assert got == [o for o in range(end) if not bases[1] <= o < bases[2]]
    assert lines == [
        {
            "event": GAP, "log_level": "error", "file": str(segment_file(tmp_path, bases[2])),
            "after": str(segment_file(tmp_path, bases[0])),
            "offsets": [bases[1], bases[2] - 1], "records": bases[2] - bases[1],
        }
    ]  # fmt: skip
    assert log.missing_records() == bases[2] - bases[1]
    assert log.damaged_ranges() == []


def test_a_segment_cut_at_a_batch_boundary_is_a_gap(tmp_path: Path) -> None:
    bases, end = make_log(tmp_path)
    path = segment_file(tmp_path, bases[1])
    data = path.read_bytes()
    batches = list(iter_batch_headers(data))
    pos, header = batches[len(batches) // 2]
    path.write_bytes(data[:pos])  # as if cut in half where a batch starts

    log, got, lines = open_logged(tmp_path)
    assert got == [o for o in range(end) if not header.base_offset <= o < bases[2]]
    assert [(e["event"], e["file"], e["offsets"]) for e in lines] == [
        (GAP, str(segment_file(tmp_path, bases[2])), [header.base_offset, bases[2] - 1])
    ]
    assert log.missing_records() == bases[2] - header.base_offset


def test_a_gap_before_an_empty_active_segment_is_stepped_over(tmp_path: Path) -> None:
    """The last sealed segment cut short, and nothing written since its roll: no batch after
    the gap to move a reader past it, so its offsets read as an empty batch over them."""
    log = SegmentLog.open(tmp_path, CONFIG)
    for i in range(30):
        log.append(build_batch([(None, b"v%03d" % i)] * 3, timestamp_ms=TS), now_ms=TS)
    log.roll()
    end = log.log_end_offset
    last_sealed = log.segments[-2].base_offset
    log.close()
    path = segment_file(tmp_path, last_sealed)
    data = path.read_bytes()
    pos, header = list(iter_batch_headers(data))[2]
    path.write_bytes(data[:pos])

    log, got, lines = open_logged(tmp_path)
    assert log.log_end_offset == end
    assert got == list(range(header.base_offset))
    assert [(e["event"], e["offsets"]) for e in lines] == [(GAP, [header.base_offset, end - 1])]
    (_, stand_in), *rest = iter_batch_headers(log.read(header.base_offset + 1, 1 << 20))
    assert (stand_in.base_offset, stand_in.last_offset, stand_in.record_count, rest) == (
        header.base_offset + 1, end - 1, 0, [],
    )  # fmt: skip


def test_a_segment_cut_inside_a_batch_is_damage_said_once(tmp_path: Path) -> None:
    bases, end = make_log(tmp_path)
    path = segment_file(tmp_path, bases[1])
    data = path.read_bytes()
    batches = list(iter_batch_headers(data))
    pos, header = batches[len(batches) // 2]
    path.write_bytes(data[: pos + 30])

    log, got, lines = open_logged(tmp_path)
    assert got == [o for o in range(end) if not header.base_offset <= o < bases[2]]
    assert [(e["event"], e["file"], e["offsets"]) for e in lines] == [
        (DAMAGE, str(path), [header.base_offset, bases[2] - 1])
    ]
    assert log.missing_records() == 0
    assert sum(d.records for d in log.damaged_ranges()) == bases[2] - header.base_offset


def test_a_segment_overlapping_the_one_before_is_served_once(tmp_path: Path) -> None:
    """A copy of the second segment's last batches, put in front of the third segment (and its
    name lowered to match): those offsets are in two files. The earlier copy is served, the
    later one is damage (nothing lost: the earlier holds every offset), said once."""
    bases, end = make_log(tmp_path)
    second = segment_file(tmp_path, bases[1]).read_bytes()
    tail = list(iter_batch_headers(second))[-2:]
    copied = second[tail[0][0] :]
    first_copied = tail[0][1].base_offset
    third = segment_file(tmp_path, bases[2])
    moved = segment_file(tmp_path, first_copied)
    moved.write_bytes(copied + third.read_bytes())
    for suffix in (".log", ".index", ".timeindex"):
        segment_file(tmp_path, bases[2], suffix).unlink()

    log, got, lines = open_logged(tmp_path)
    assert got == list(range(end))  # each offset once, none lost
    assert [(e["event"], e["file"], e["offsets"], e["reason"]) for e in lines] == [
        (DAMAGE, str(moved), [bases[2], bases[2] - 1], "overlap")
    ]
    assert lines[0]["overlaps"] == [first_copied, bases[2] - 1]
    assert lines[0]["positions"] == [0, len(copied)]
    assert log.damaged_ranges()[0].records == 0
    assert log.missing_records() == 0


def test_a_gap_deleted_by_retention_is_no_longer_counted(tmp_path: Path) -> None:
    bases, _ = make_log(tmp_path)
    os.remove(segment_file(tmp_path, bases[1]))
    log, _, _ = open_logged(tmp_path)
    assert log.missing_records() == bases[2] - bases[1]
    log.advance_log_start(bases[2])
    assert log.missing_records() == 0
