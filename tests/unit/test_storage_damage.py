"""Damage inside a sealed segment is found, logged once, counted, and stepped over (issues 9, 28).

The segment's indexes are intact, so the broker opens it without a scan (as after any clean
start) and meets the damage at the first read: flipped bytes (a CRC that fails), a length field
set huge or negative, a wrong magic byte, 16 bytes flipped at the segment's midpoint, a base
offset raised (outside the CRC: only its continuity tells), damage at the very start and at the
very end of a segment. Reads never return damaged bytes, offsets in the damage read as a
stand-in (an empty batch over them), and everything else is served, by small reads and by
reads the size of a consumer's (which used to raise InvalidRecordBatch at a damaged header).
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
    set_length(path, at, 2**31 - 1)


def set_length(path: Path, at: int, length: int) -> None:
    data = bytearray(path.read_bytes())
    data[at + 8 : at + 12] = length.to_bytes(4, "big", signed=True)
    path.write_bytes(bytes(data))


def set_byte(path: Path, at: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] = value
    path.write_bytes(bytes(data))


def raise_base_offset(path: Path, at: int, by: int) -> None:
    data = bytearray(path.read_bytes())
    base = int.from_bytes(data[at : at + 8], "big")
    data[at : at + 8] = (base + by).to_bytes(8, "big")
    path.write_bytes(bytes(data))


def flip_midpoint(path: Path, at: int, size: int) -> None:
    flip(path, path.stat().st_size // 2)


def indexed_batches(directory: Path, base: int) -> list[int]:
    """Base offsets of the batches an offset index entry of segment `base` names."""
    log = SegmentLog.open(directory, CONFIG)
    segment = next(s for s in log.segments if s.base_offset == base)
    found = [base + o for o in segment.offset_index.offsets]
    log.close()
    return found


def offsets_served(
    log: SegmentLog, max_bytes: int = 500
) -> tuple[list[int], list[tuple[int, int]]]:
    """Every offset a reader gets, stepping over damage as a consumer would; and the damage."""
    got: list[int] = []
    damaged: list[tuple[int, int]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        assert data, f"nothing read at {offset}, before the log end: a reader would stop"
        for _, h in iter_batch_headers(data):
            if h.record_count == 0:  # a stand-in for damaged offsets: the only empty batches
                damaged.append((h.base_offset, h.last_offset))
            else:
                got.extend(range(max(h.base_offset, offset), h.last_offset + 1))
            offset = h.last_offset + 1
    return got, damaged


Damage = Callable[[Path, int, int], None]
CASES: dict[str, tuple[Damage, int | str]] = {
    # (how the batch is damaged, which batch of the second segment: 0 first, -1 last,
    # "midpoint" the one at the middle of the file, "indexed" one an index entry names)
    "flipped-bytes-middle": (lambda p, at, size: flip(p, at + 70), 3),
    "huge-length-middle": (lambda p, at, size: huge_length(p, at), 3),
    "flipped-bytes-first": (lambda p, at, size: flip(p, at + 70), 0),
    "flipped-header-last": (lambda p, at, size: flip(p, at + 10, 8), -1),
    "negative-length-middle": (lambda p, at, size: set_length(p, at, -5), 3),
    "wrong-magic-middle": (lambda p, at, size: set_byte(p, at + 16, 7), 3),
    "flipped-16-at-midpoint": (flip_midpoint, "midpoint"),
    "base-offset-raised-first": (lambda p, at, size: raise_base_offset(p, at, 50), 0),
    "base-offset-raised-middle": (lambda p, at, size: raise_base_offset(p, at, 50), 3),
    "base-offset-raised-indexed": (lambda p, at, size: raise_base_offset(p, at, 50), "indexed"),
    "base-offset-raised-last": (lambda p, at, size: raise_base_offset(p, at, 50), -1),
}


def victim_of(directory: Path, bases: list[int], which: int | str) -> int:
    """Base offset of the batch of the second segment that `which` names."""
    batches = [o for o in range(bases[1], bases[2]) if (o - bases[1]) % 3 == 0]
    if which == "indexed":
        return indexed_batches(directory, bases[1])[0]
    if which == "midpoint":
        path = directory / f"{bases[1]:020d}.log"
        middle = path.stat().st_size // 2
        for offset in batches:
            _, at, size = batch_position(directory, offset)
            if at <= middle < at + size:
                assert middle + 16 <= at + size  # the 16 bytes hit this one batch only
                return offset
    assert isinstance(which, int)
    return batches[which]


@pytest.mark.parametrize("max_bytes", [500, 1 << 20])
@pytest.mark.parametrize("case", CASES)
def test_damage_met_at_read_time_is_stepped_over(tmp_path: Path, case: str, max_bytes: int) -> None:
    damage, which = CASES[case]
    bases, end = make_log(tmp_path)
    victim = victim_of(tmp_path, bases, which)
    path, at, size = batch_position(tmp_path, victim)
    damage(path, at, size)

    with capture_logs() as logs:
        # Found at open when the damage is in what open checks, else at the first read.
        log = SegmentLog.open(tmp_path, CONFIG)
        assert not [e for e in log.recovery_events if e.kind == "truncated"]
        got, damaged = offsets_served(log, max_bytes)
        again, _ = offsets_served(log, max_bytes)  # a second reader: nothing new to log
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
    (_, stand_in), *more = iter_batch_headers(log.read(victim + 1, 1 << 20))
    assert (stand_in.base_offset, stand_in.last_offset, stand_in.record_count) == (
        victim, victim + 2, 0,
    )  # fmt: skip
    # The same read goes on past the stand-in with the batches after it (issue 29).
    assert more and more[0][1].base_offset == victim + 3
    assert all(h.record_count for _, h in more)
