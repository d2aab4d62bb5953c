"""Sparse offset and time indexes, kept in memory and saved in Kafka's file layouts.

Offset index entry: relative offset int32, position int32 (8 bytes, big-endian).
Time index entry: timestamp int64, relative offset int32 (12 bytes, big-endian).
Both are parallel ``array``s so that lookups are one C-level bisect; the files are
(de)interleaved with strided slices rather than a per-entry Python loop.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from bisect import bisect_right
from itertools import pairwise

from storage.errors import StorageException

_SWAP = sys.byteorder == "little"


def _to_big_endian(values: array[int]) -> bytes:
    copy = array(values.typecode, values)
    if _SWAP:
        copy.byteswap()
    return copy.tobytes()


def _from_big_endian(typecode: str, data: bytes) -> array[int]:
    values = array(typecode)
    values.frombytes(data)
    if _SWAP:
        values.byteswap()
    return values


def _interleave(columns: list[bytes], widths: list[int], count: int) -> bytes:
    entry = sum(widths)
    out = bytearray(entry * count)
    start = 0
    for column, width in zip(columns, widths, strict=True):
        for k in range(width):
            out[start + k :: entry] = column[k::width]
        start += width
    return bytes(out)


def _deinterleave(data: bytes, widths: list[int]) -> list[bytes]:
    entry = sum(widths)
    count = len(data) // entry
    columns = []
    start = 0
    for width in widths:
        column = bytearray(width * count)
        for k in range(width):
            column[k::width] = data[start + k :: entry]
        columns.append(bytes(column))
        start += width
    return columns


class IndexCorrupt(StorageException, ValueError):
    pass


class OffsetIndex:
    ENTRY_SIZE = 8

    __slots__ = ("offsets", "positions")

    def __init__(self) -> None:
        self.offsets: array[int] = array("i")
        self.positions: array[int] = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, relative_offset: int, position: int) -> None:
        self.offsets.append(relative_offset)
        self.positions.append(position)

    def lookup(self, relative_offset: int) -> int:
        """Position of the last indexed batch starting at or before the offset (else 0)."""
        i = bisect_right(self.offsets, relative_offset)
        return self.positions[i - 1] if i else 0

    def floor_position(self, position: int) -> int:
        """Largest indexed batch position at or below ``position`` (else 0)."""
        i = bisect_right(self.positions, position)
        return self.positions[i - 1] if i else 0

    def to_bytes(self) -> bytes:
        cols = [_to_big_endian(self.offsets), _to_big_endian(self.positions)]
        return _interleave(cols, [4, 4], len(self))

    @classmethod
    def from_bytes(cls, data: bytes, segment_size: int) -> OffsetIndex:
        """Load and sanity-check (ZODB-style) an index file against its segment."""
        if len(data) % cls.ENTRY_SIZE:
            raise IndexCorrupt("offset index size is not a whole number of entries")
        index = cls()
        offsets, positions = _deinterleave(data, [4, 4])
        index.offsets = _from_big_endian("i", offsets)
        index.positions = _from_big_endian("i", positions)
        if not _strictly_increasing(index.offsets) or not _strictly_increasing(index.positions):
            raise IndexCorrupt("offset index entries are not increasing")
        if index.positions and (index.positions[0] < 0 or index.positions[-1] >= segment_size):
            raise IndexCorrupt("offset index points outside its segment")
        return index


class TimeIndex:
    ENTRY_SIZE = 12

    __slots__ = ("offsets", "timestamps")

    def __init__(self) -> None:
        self.timestamps: array[int] = array("q")
        self.offsets: array[int] = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, relative_offset: int) -> None:
        """Record a new maximum timestamp (entries only ever increase)."""
        if timestamp > self.last_timestamp:
            self.timestamps.append(timestamp)
            self.offsets.append(relative_offset)

    def scan_start(self, timestamp: int) -> int | None:
        """Relative offset of a batch whose predecessors all have smaller timestamps.

        The batch at the returned offset itself also does, so a scan may start after
        it; None means scan from the segment start.
        """
        i = bisect_left(self.timestamps, timestamp)
        return self.offsets[i - 1] if i else None

    def to_bytes(self) -> bytes:
        cols = [_to_big_endian(self.timestamps), _to_big_endian(self.offsets)]
        return _interleave(cols, [8, 4], len(self))

    @classmethod
    def from_bytes(cls, data: bytes) -> TimeIndex:
        if len(data) % cls.ENTRY_SIZE:
            raise IndexCorrupt("time index size is not a whole number of entries")
        index = cls()
        timestamps, offsets = _deinterleave(data, [8, 4])
        index.timestamps = _from_big_endian("q", timestamps)
        index.offsets = _from_big_endian("i", offsets)
        if not _strictly_increasing(index.timestamps) or not _non_decreasing(index.offsets):
            raise IndexCorrupt("time index entries are not increasing")
        return index


def _strictly_increasing(values: array[int]) -> bool:
    return all(a < b for a, b in pairwise(values))


def _non_decreasing(values: array[int]) -> bool:
    return all(a <= b for a, b in pairwise(values))
