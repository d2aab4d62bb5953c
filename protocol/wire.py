"""Kafka wire primitives for the hot path's own serialisers (`produce_response`,
`share_fetch_response`): fixed-width integers, classic and compact (flexible-version) strings
and array lengths. kio's writers are the reference; the serialisers are tested against them.
"""

from __future__ import annotations

import struct

INT64 = struct.Struct(">q")
INT32 = struct.Struct(">i")
INT16 = struct.Struct(">h")
NO_TAGGED_FIELDS = b"\x00"


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def uvarint(value: int) -> bytes:
    """An unsigned varint (compact lengths, tag counts)."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]  # nearly every length and count on the hot path
    if 0x80 <= value < 0x4000:  # a small record batch's length: no loop (~60 opcodes less)
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(value: str, flexible: bool) -> bytes:
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else INT16.pack(len(data))) + data


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else INT16.pack(-1)
    return string(value, flexible)


def array_length(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else INT32.pack(n)
