"""Damaged stretches of a segment: found, logged once, counted, and stepped over.

A stretch is damaged where the bytes at which a batch should start do not hold one (bad magic
or length, a length that runs past the file, a base offset that does not follow the batch
before) or where a batch's CRC32C does not match its bytes. Damage is found when a segment is
recovered at start, or at the latest when its bytes are first read: every read checks the
headers and CRCs of the batches it returns once (positions already checked are remembered, so
a steady reader pays for each byte once).

The stretch ends at the next intact batch, found through the offset index (its entries name
batch starts) or, failing that, by scanning for a batch whose header, offset and CRC hold up.
Reads never return damaged bytes: a read that meets damage later stops before it, and one that
starts in a damaged stretch gets a stand-in for it (`stand_in`): an empty batch, a header with
no records whose offsets are the stretch's, as the cleaner leaves for offsets it removed. Every
reader steps over it as over those (a consumer moves to the offset after it, a share group
archives its offsets), so damage costs the offsets it held and stops no reader.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Protocol

import crc32c
import structlog

from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import MAGIC
from protocol.record_batch import MAGIC_POS
from protocol.record_batch import BatchHeader
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import parse_header
from protocol.records import StoredBatch
from protocol.records import build_stored_batch

_log = structlog.get_logger("shoal.storage")

SCAN_CHUNK = 1 << 20
MAGIC_BYTE = bytes([MAGIC])


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Bytes [start, end) of a segment that hold no readable batch, and the offsets they held."""

    start: int
    end: int
    first_offset: int
    last_offset: int  # first_offset - 1 when the stretch held no offset (garbage between batches)

    @property
    def records(self) -> int:
        return max(0, self.last_offset - self.first_offset + 1)


class DamageMap:
    """The damaged ranges of one segment and the byte ranges already CRC-checked."""

    __slots__ = ("_ends", "_ranges", "_verified_ends", "_verified_starts")

    def __init__(self) -> None:
        self._ranges: list[DamagedRange] = []
        self._ends: list[int] = []
        self._verified_starts: list[int] = []
        self._verified_ends: list[int] = []

    @property
    def ranges(self) -> list[DamagedRange]:
        return list(self._ranges)

    def __bool__(self) -> bool:
        """Whether any range is damaged (nearly never)."""
        return bool(self._ranges)

    def add(self, damaged: DamagedRange) -> None:
        i = bisect.bisect_left(self._ends, damaged.end)
        self._ranges.insert(i, damaged)
        self._ends.insert(i, damaged.end)

    def drop_before(self, position: int) -> None:
        """Forget the ranges ending at or before `position` (a larger one replaces them)."""
        i = bisect.bisect_right(self._ends, position)
        del self._ranges[:i], self._ends[:i]

    def at_position(self, position: int) -> DamagedRange | None:
        """The range holding byte `position`."""
        i = bisect.bisect_right(self._ends, position)
        if i < len(self._ranges) and self._ranges[i].start <= position:
            return self._ranges[i]
        return None

    def next_from(self, position: int) -> DamagedRange | None:
        """The first range ending after `position` (it may start after it)."""
        i = bisect.bisect_right(self._ends, position)
        return self._ranges[i] if i < len(self._ranges) else None

    def at_offset(self, offset: int) -> DamagedRange | None:
        for r in self._ranges:  # a handful at most: damage is rare
            if r.first_offset <= offset <= r.last_offset:
                return r
        return None

    def verified(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self._verified_starts, start) - 1
        return i >= 0 and self._verified_ends[i] >= end

    def mark_verified(self, start: int, end: int) -> None:
        """Merge [start, end) into the checked ranges (sequential reads keep one range)."""
        starts, ends = self._verified_starts, self._verified_ends
        if ends and starts[-1] <= start <= ends[-1] <= end:
            ends[-1] = end  # an append, or a reader at the tail: the last range grows
            return
        i = bisect.bisect_left(ends, start)
        j = bisect.bisect_right(starts, end)
        if i < j:
            start, end = min(start, starts[i]), max(end, ends[j - 1])
        starts[i:j], ends[i:j] = [start], [end]


class Scanned(Protocol):
    """What damage finding reads of a segment (`storage.segment.Segment` is one): this module
    is the lower one, so it names the few members it uses rather than the class."""

    size: int
    damage: DamageMap

    def read(self, position: int, size: int) -> bytes: ...

    def describe(self) -> str: ...


def intact(
    segment: Scanned, position: int, offsets: tuple[int, int] | None = None
) -> BatchHeader | None:
    """The header of an intact batch at `position`, its base offset in [lo, hi) if given."""
    if segment.size - position < BATCH_HEADER_SIZE:
        return None
    try:
        header = parse_header(segment.read(position, BATCH_HEADER_SIZE))
    except InvalidRecordBatch:
        return None
    if position + header.size > segment.size:
        return None
    if offsets is not None and not offsets[0] <= header.base_offset < offsets[1]:
        return None
    data = segment.read(position, header.size)
    if crc32c.crc32c(data[ATTRIBUTES_POS:]) != header.crc:
        return None
    return header


def _resync(segment: Scanned, start: int, offsets: tuple[int, int]) -> tuple[int, int] | None:
    """(position, base offset) of the first intact batch after `start`.

    Every magic byte after the damage is tried as the start of a batch whose offsets fall in
    `offsets` and whose CRC holds: the nearest intact batch is found, however the damage
    changed the lengths before it.
    """
    chunk_start = start + 1
    while chunk_start + MAGIC_POS < segment.size:
        buf = segment.read(chunk_start, min(SCAN_CHUNK, segment.size - chunk_start))
        at = buf.find(MAGIC_BYTE, MAGIC_POS)
        while at >= 0:
            position = chunk_start + at - MAGIC_POS
            header = intact(segment, position, offsets)
            if header is not None:
                return position, header.base_offset
            at = buf.find(MAGIC_BYTE, at + 1)
        chunk_start += max(len(buf) - BATCH_HEADER_SIZE, 1)
    return None


def find_damage(
    segment: Scanned, position: int, expected: int, end_offset: int, reason: str
) -> DamagedRange:
    """Record the damage found at `position`, where a batch of offset `expected` belongs."""
    known = segment.damage.at_position(position)
    if known is not None:
        return known
    found = _resync(segment, position, (expected, end_offset))
    end, next_offset = found if found is not None else (segment.size, end_offset)
    damaged = DamagedRange(position, end, expected, next_offset - 1)
    record_damage(segment, damaged, reason)
    return damaged


def record_damage(segment: Scanned, damaged: DamagedRange, reason: str, **detail: object) -> None:
    """Remember a damaged stretch and say so, once: the one log line of each stretch."""
    segment.damage.add(damaged)
    _log.error(
        "damaged record batches stepped over",
        file=segment.describe(), positions=[damaged.start, damaged.end],
        offsets=[damaged.first_offset, damaged.last_offset], records=damaged.records,
        reason=reason, **detail,
    )  # fmt: skip


def stand_in(first_offset: int, last_offset: int) -> bytes:
    """What a read of the damaged offsets returns: an empty batch (a 61-byte header, no
    records) covering them, with a valid CRC. Clients step over it by its last offset, as over
    the empty batches compaction leaves (Kafka's consumer, librdkafka's msgset reader: the
    next fetch offset is a batch's last offset + 1, records or not)."""
    fields = StoredBatch(
        base_offset=first_offset, last_offset=last_offset, attributes=0,
        base_timestamp=-1, max_timestamp=-1, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, record_count=0,
    )  # fmt: skip
    return build_stored_batch(fields, b"")
