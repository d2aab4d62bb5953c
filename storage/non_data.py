"""The offsets of a segment that hold no data record, as ranges: control batches (share state,
transaction markers) and empty batches (offsets the cleaner removed).

Lag counts data records only, for consumer and share groups alike: it subtracts these offsets
by range (two bisections), never by reading the log when asked. A segment learns its ranges
from the batch headers it tracks (appends, the recovery scan); a sealed one keeps them beside
it in `<base>.nondata` (Shoal's own file), so a restart reads that file instead of walking
every header again. The file is a cache: missing, unreadable or made for another size of the
segment, it is ignored and the segment's headers are walked once more (`Segment.learn_non_data`).

File layout (big-endian): magic `SNDR`, version int16, segment size int64, range count int64,
then per range first offset and end offset (exclusive) int64, then a CRC32C of all before it.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterator

import crc32c

_MAGIC = b"SNDR"
_VERSION = 0
_HEAD = struct.Struct(">4shqq")
_CRC = struct.Struct(">I")
_LITTLE = sys.byteorder == "little"


class NonDataRanges:
    """Sorted, disjoint ranges `[first, end)`; adjacent ones merge as they are added.

    Kept in int64 arrays with a running total (24 bytes a range): a partition whose share
    groups acknowledge often holds one control batch per acknowledgement.
    """

    __slots__ = ("_cum", "_ends", "_starts")

    def __init__(self) -> None:
        self._starts = array("q")
        self._ends = array("q")
        self._cum = array("q")  # non-data offsets in ranges 0..i

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def total(self) -> int:
        return self._cum[-1] if self._cum else 0

    def add(self, first: int, last: int) -> None:
        """Offsets `first..last` hold no data; added in increasing order (a batch at a time)."""
        ends = self._ends
        if ends and first <= ends[-1]:  # adjacent (or a re-tracked batch): extend the last
            grown = last + 1 - ends[-1]
            if grown > 0:
                ends[-1] = last + 1
                self._cum[-1] += grown
            return
        self._starts.append(first)
        ends.append(last + 1)
        self._cum.append(self.total + last + 1 - first)

    def below(self, offset: int) -> int:
        """Non-data offsets lower than `offset`."""
        i = bisect_right(self._starts, offset) - 1
        if i < 0:
            return 0
        return self._cum[i] - max(self._ends[i] - offset, 0)

    def count(self, start: int, end: int) -> int:
        """Non-data offsets in `[start, end)`."""
        return self.below(end) - self.below(start) if end > start else 0

    def data_from(self, offset: int) -> int:
        """The first offset at or after `offset` that no range holds."""
        i = bisect_right(self._starts, offset) - 1
        return self._ends[i] if i >= 0 and offset < self._ends[i] else offset

    def ranges(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """The ranges within `[start, end)`, clipped, as (first, last) inclusive."""
        i = max(bisect_right(self._starts, start) - 1, 0)
        while i < len(self._starts) and self._starts[i] < end:
            lo, hi = max(self._starts[i], start), min(self._ends[i], end)
            if lo < hi:
                yield lo, hi - 1
            i += 1

    def to_bytes(self, segment_size: int) -> bytes:
        body = _HEAD.pack(_MAGIC, _VERSION, segment_size, len(self._starts))
        pairs = array("q", bytes(16 * len(self._starts)))
        pairs[0::2], pairs[1::2] = self._starts, self._ends
        if _LITTLE:  # the file is big-endian, as Kafka's index files are
            pairs.byteswap()
        data = body + pairs.tobytes()
        return data + _CRC.pack(crc32c.crc32c(data))

    @classmethod
    def from_bytes(cls, data: bytes, segment_size: int) -> NonDataRanges | None:
        """The ranges saved for a segment of `segment_size` bytes; None when the file is not
        whole, not ours, or describes the segment at another size."""
        if len(data) < _HEAD.size + _CRC.size:
            return None
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc32c.crc32c(data[: -_CRC.size]) != crc:
            return None
        magic, version, size, n = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != _VERSION or size != segment_size:
            return None
        if len(data) != _HEAD.size + 16 * n + _CRC.size:
            return None
        pairs = array("q", data[_HEAD.size : -_CRC.size])
        if _LITTLE:
            pairs.byteswap()
        out = cls()
        for first, end in zip(pairs[::2], pairs[1::2], strict=True):
            if end <= first or (out._ends and first < out._ends[-1]):
                return None
            out.add(first, end - 1)
        return out
