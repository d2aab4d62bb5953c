"""The bounds check of the commonest request, a Produce of one batch to one partition, by hand.

A producer at a steady rate (librdkafka with `linger.ms=0`, every queue user's default) sends
one such request per record, and each paid the generated walk of `protocol.request_bounds`:
~280 bytecodes, 14% of the broker's own per request. These read the same bytes in ~150, and
the flexible versions in 74 once a producer's repeated bytes are known (`bench/opcount.py`), for
the one shape: the header's and body's tagged fields empty, one topic of one partition, every
length in one varint byte (the records' in two, so batches up to 16 KiB). For anything else
they hand the frame to the generated walk, which decides: they never accept a frame the walk
refuses, and return where it ends as the walk does (tests hold them to it on valid and
mutated frames, `tests/unit/test_produce_bounds.py`).

Each test below is one the generated walk makes too: a position that runs past the frame
raises IndexError or struct.error (the frame is then walked whole, and refused), and the last
one, the end within the frame (the three tag bytes there), bounds every length read on the way.
Nulls where Kafka allows them: the client id, the transactional id, the records (the handler
answers INVALID_RECORD).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

Walker = Callable[[Any], int]

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
FIRST_FLEXIBLE_VERSION = 9  # Produce v9+: header v2 and compact fields (KIP-482)


def produce_walker(version: int, walk: Walker) -> Walker:
    """The bounds check of Produce `version`: the one-partition shape here, else `walk`."""
    return _flexible(walk) if version >= FIRST_FLEXIBLE_VERSION else _legacy(walk)


def _flexible(walk: Walker) -> Walker:
    # The bytes from the client id to the partition index of the last frame of the shape, and
    # where they end: a producer repeats them in every request to a topic (only the correlation
    # id before them and the partition index after them change), and bytes equal to ones
    # already read give the same positions, so they are compared whole instead of read again.
    # One tuple, read and replaced whole: frames decoded in threads share it safely.
    known: tuple[bytes | None, int] = (None, 0)

    def one_partition(b: Any) -> int:
        nonlocal known
        prefix, q = known
        try:
            if b[8:q] != prefix:
                c = _I16(b, 8)[0]  # the client id: a nullable int16-length string in every header
                if c < -1:
                    return walk(b)
                p = 10 + c if c > 0 else 10
                c = b[p + 1]  # after the header's tags: the transactional id, compact, nullable
                if b[p] or c >= 0x80:
                    return walk(b)
                p += (
                    7 + c if c else 8
                )  # the header's tags, the id's length and bytes, acks, timeout
                c = b[p + 1]  # the topic's name, compact, non-null
                if b[p] != 2 or not 0 < c < 0x80 or b[p + c + 1] != 2:  # one topic, one partition
                    return walk(b)
                q = p + c + 2  # count, name length and name, partition count
                known = (bytes(b[8:q]), q)
            p = q + 4  # the partition index
            c = b[p]  # the records' length + 1, compact, nullable
            if c < 0x80:
                p += 1
            elif b[p + 1] < 0x80:
                c = c & 0x7F | b[p + 1] << 7
                p += 2
            else:
                return walk(b)
            if c:
                p += c - 1
        except (IndexError, struct.error):  # a position, or the client id, past the end
            return walk(b)
        # The tags of the partition, topic and request: three bytes there, all zero, also say
        # that the frame holds every byte read before them.
        return p + 3 if b[p : p + 3] == b"\x00\x00\x00" else walk(b)

    return one_partition


def _legacy(walk: Walker) -> Walker:
    def one_partition(b: Any) -> int:
        try:
            c = _I16(b, 8)[0]  # the client id
            if c < -1:
                return walk(b)
            p = 10 + c if c > 0 else 10
            c = _I16(b, p)[0]  # the transactional id, nullable
            if c < -1:
                return walk(b)
            p += 8 + c if c > 0 else 8  # its length, acks and timeout
            c = _I16(b, p + 4)[0]  # the topic's name, non-null
            if _I32(b, p)[0] != 1 or c < 0 or _I32(b, p + 6 + c)[0] != 1:
                return walk(b)
            p += c + 14  # count, name, partition count, partition index
            c = _I32(b, p)[0]  # the records, nullable
            if c < -1:
                return walk(b)
            p += 4 + c if c > 0 else 4
        except struct.error:  # unpack_from past the end
            return walk(b)
        return p if p <= len(b) else walk(b)

    return one_partition
