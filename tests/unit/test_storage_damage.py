"""Damage inside a sealed segment is found, logged once, counted, and stepped over (issue 9).

The segment's indexes are intact, so the broker opens it without a scan (as after any clean
start) and meets the damage at the first read: flipped bytes (a CRC that fails), a length field
set huge, damage at the very start and at the very end of a segment. Reads never return damaged
bytes, offsets in the damage raise CorruptRecords, and everything after it is served.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import SegmentLog
from storage.errors import CorruptRecords

TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)


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


def batch_position(directory: Path, offset: int) -> tuple[Path, int, int]:
    """(segment file, position, size) of the stored batch holding `offset`."""
    log = SegmentLog.open(directory, CONFIG)
    data = log.read(offset, 1)
    segment = next(s for s in reversed(log.segments) if s.base_offset <= offset)
    log.close()
    path = directory / f"{segment.base_offset:020d}.log"
    return path, path.read_bytes().index(data), len(data)


def flip(path: Path, at: int, n: int = 16) -> None:
    data = bytearray(path.read_bytes())
    data[at : at + n] = bytes(b ^ 0xFF for b in data[at : at + n])
    path.write_bytes(bytes(data))


def huge_length(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at + 8 : at + 12] = (2**31 - 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))


def offsets_served(log: SegmentLog) -> tuple[list[int], list[tuple[int, int]]]:
    """Every offset a reader gets, stepping over damage as a consumer would; and the damage."""
    got: list[int] = []
    damaged: list[tuple[int, int]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        try:
            data = log.read(offset, 500)
        except CorruptRecords as e:
            damaged.append((e.first_offset, e.last_offset))
            offset = e.next_offset
            continue
        for _, h in iter_batch_headers(data):
            got.extend(range(max(h.base_offset, offset), h.last_offset + 1))
            offset = h.last_offset + 1
    return got, damaged


Damage = Callable[[Path, int, int], None]
CASES: dict[str, tuple[Damage, int]] = {
    # (how the batch is damaged, which batch of the second segment: 0 first, -1 last)
    "flipped-bytes-middle": (lambda p, at, size: flip(p, at + 70), 3),
    "huge-length-middle": (lambda p, at, size: huge_length(p, at), 3),
    "flipped-bytes-first": (lambda p, at, size: flip(p, at + 70), 0),
    "flipped-header-last": (lambda p, at, size: flip(p, at + 10, 8), -1),
}


@pytest.mark.parametrize("case", CASES)
def test_damage_met_at_read_time_is_stepped_over(tmp_path: Path, case: str) -> None:
    damage, which = CASES[case]
    bases, end = make_log(tmp_path)
    second = range(bases[1], bases[2])
    batches = [o for o in second if (o - bases[1]) % 3 == 0]
    victim = batches[which]
    path, at, size = batch_position(tmp_path, victim)
    damage(path, at, size)

    with capture_logs() as logs:
        # Found at open when the damage is in what open checks, else at the first read.
        log = SegmentLog.open(tmp_path, CONFIG)
        assert not [e for e in log.recovery_events if e.kind == "truncated"]
        got, damaged = offsets_served(log)
        again, _ = offsets_served(log)  # a second reader: nothing new to log
    lost = set(range(victim, victim + 3))
    assert damaged == [(victim, victim + 2)]
    assert got == again == [o for o in range(end) if o not in lost]  # nothing else is lost
    lines = [e for e in logs if e["event"] == "damaged record batches stepped over"]
    assert len(lines) == 1 and lines[0]["offsets"] == [victim, victim + 2]
    assert lines[0]["file"] == str(path)
    assert [(d.first_offset, d.last_offset) for s in log.segments for d in s.damage.ranges] == [
        (victim, victim + 2)
    ]
    assert [s.base_offset for s in log.segments] == bases  # no segment deleted


def test_a_damaged_batch_is_not_returned_inside_a_larger_read(tmp_path: Path) -> None:
    bases, _ = make_log(tmp_path)
    victim = bases[1] + 9
    path, at, _ = batch_position(tmp_path, victim)
    flip(path, at + 70)
    log = SegmentLog.open(tmp_path, CONFIG)
    data = log.read(bases[1], 1 << 20)  # starts before the damage: stops at it
    assert [h.last_offset for _, h in iter_batch_headers(data)][-1] == victim - 1
    with pytest.raises(CorruptRecords):
        log.read(victim + 1, 1 << 20)
