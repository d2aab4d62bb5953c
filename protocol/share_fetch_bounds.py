"""The bounds check of a steady-rate ShareFetch, one partition with a few acknowledgement
batches, by hand (issue 33).

A share consumer at a steady rate sends one such request per record or two, and each paid the
generated walk of `protocol.request_bounds`: 356 bytecodes for one partition and one batch,
~3% of the broker's steps for the whole request (`bench/share_opcount.py`). This reads the same
bytes in fewer, for the one shape: the header's and every struct's tagged fields empty, one
topic of one partition with 1 to `MAX_BATCHES` acknowledgement batches (or none: an empty
array), each with 1 to 127 acknowledge types, nothing forgotten, the group and member ids in
one varint byte. For anything else it hands the frame to the generated walk, which decides: it
never accepts a frame the walk refuses, and returns where it ends as the walk does
(`tests/unit/test_share_fetch_bounds.py` holds it to that on valid and mutated frames).

Each test below is one the generated walk makes too. A position past the frame raises
IndexError or struct.error (the frame is then walked whole, and refused), and the last byte
read, the request's tagged fields, bounds every length skipped on the way. Nulls where Kafka
allows them: the group and member ids (the handler answers INVALID_REQUEST); an array's null
(a count byte of 0) is left to the walk, which refuses it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

Walker = Callable[[Any], int]

_I16 = struct.Struct(">h").unpack_from
# More batches than this are left to the walk, which checks many alike ones by strides.
MAX_BATCHES = 8
# ShareFetch v1: epoch, max wait, min bytes, max bytes, max records, batch size (int32 each);
# v2 adds ShareAcquireMode (int8) and IsRenewAck (bool).
_FIXED = {1: 24, 2: 26}


def share_fetch_walker(version: int, walk: Walker) -> Walker:
    """The bounds check of ShareFetch `version`: the one-partition shape here, else `walk`."""
    fixed = _FIXED.get(version)
    if fixed is None:
        return walk

    def one_partition(b: Any) -> int:
        try:
            c = _I16(b, 8)[0]  # the client id: a nullable int16-length string in every header
            if c < -1:
                return walk(b)
            p = 10 + c if c > 0 else 10
            if b[p]:  # the header's tags
                return walk(b)
            c = b[p + 1]  # the group id, compact, nullable: its length + 1 in one byte
            if c >= 0x80:
                return walk(b)
            p += 1 + (c or 1)
            c = b[p]  # the member id, the same
            if c >= 0x80:
                return walk(b)
            p = _partition_end(b, p + (c or 1) + fixed)
            if p < 0:
                return walk(b)
        except (IndexError, struct.error):  # a position, or the client id, past the end
            return walk(b)
        # The partition's and the topic's tags, an empty forgotten array and the request's
        # tags: four bytes there, as they must be, also say the frame holds every byte before.
        return p + 4 if b[p : p + 4] == b"\x00\x00\x01\x00" else walk(b)

    return one_partition


def _partition_end(b: Any, p: int) -> int:
    """From the topic count at `p`: one topic (its id) of one partition (its index) and its
    batches; where they end, or -1 for another shape. Raises IndexError past the frame."""
    if b[p] != 2 or b[p + 17] != 2:
        return -1
    p += 22
    batches = b[p] - 1
    if not 0 <= batches <= MAX_BATCHES:  # -1: a null array, the walk's to refuse
        return -1
    p += 1
    for _ in range(batches):
        c = b[p + 16]  # first and last offsets, then the types' count + 1
        if not 0 < c < 0x80 or b[p + 16 + c]:  # its tags after the types
            return -1
        p += 17 + c
    return p
