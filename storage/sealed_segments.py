"""``sealed-segments``: each sealed segment's size, end and largest timestamp, in one small file
per log, so that a start opens sealed segments lazily (`FileSegment`'s `loader`: no index file
read, no header walk) and still knows where each ends (offsets missing between segments are
found at open, `storage.segment_ranges`) and how old it is (retention reads only that).

Shoal's own file, and a cache: written when a log closes with other sealed segments than the
file names, unsynced (a lost or torn file only costs reading those segments' indexes at the
next start, as before it existed; its CRC says whether it is whole). An entry is used only for
a segment whose file has the size it names: one cut or replaced since is loaded at open.
Kafka keeps no such file: its `LogLoader` takes each sealed segment to end where the next one
begins, and defers reading its indexes (`LazyIndex`) until they are used.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from storage.segment import Segment

SEALED_SEGMENTS = "sealed-segments"
VERSION = 0


@dataclass(frozen=True, slots=True)
class SealedEntry:
    size: int  # of the .log file it describes
    next_offset: int
    max_timestamp: int


def encode(sealed: Sequence[Segment]) -> bytes:
    """The file's bytes for these segments (read nothing: a lazy segment's end and largest
    timestamp were set from the file it was opened by)."""
    body = "".join(
        f"{s.base_offset} {s.size} {s.next_offset} {s.max_timestamp}\n" for s in sealed
    ).encode()
    return b"%d %d\n" % (VERSION, zlib.crc32(body)) + body


def decode(data: bytes) -> dict[int, SealedEntry]:
    """:raises ValueError: not a whole file of this version."""
    head, _, body = data.partition(b"\n")
    version, crc = (int(v) for v in head.split())
    if version != VERSION or crc != zlib.crc32(body):
        raise ValueError("version or CRC")
    entries = {}
    for line in body.decode().splitlines():
        base, size, next_offset, max_timestamp = (int(v) for v in line.split())
        if size < 0 or next_offset < base:
            raise ValueError(f"entry {line[:80]!r}")
        entries[base] = SealedEntry(size, next_offset, max_timestamp)
    return entries


def read_sealed(directory: Path, names: list[str]) -> tuple[dict[int, SealedEntry], bytes]:
    """The entries of the log's file (none when it is absent, unreadable or torn), and its
    bytes (to know whether a close must write it again)."""
    if SEALED_SEGMENTS not in names:
        return {}, b""
    try:
        data = (directory / SEALED_SEGMENTS).read_bytes()
        return decode(data), data
    except (OSError, ValueError, UnicodeDecodeError):
        return {}, b""
