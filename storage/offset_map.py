"""The cleaner's key -> latest offset map (Kafka's SkimpyOffsetMap), bounded in entries.

Keys are stored by their 16-byte MD5 digest, as Kafka does: a long key costs no more than a
short one, and a collision (of MD5 over one partition's keys) is not a practical concern.

Kafka sizes the map from ``log.cleaner.dedupe.buffer.size`` at 24 bytes an entry (the digest
and an 8-byte offset in one flat buffer). Shoal's map is a dict of digest -> int, which costs
far more per entry: about 133 bytes measured with tracemalloc (a 49-byte bytes object, a
32-byte int and the dict's slot), up to ~150 while the dict grows. So Shoal counts
`BYTES_PER_ENTRY` = 150 per entry: the config bounds the memory the map really takes, and the
default 128 MiB holds about 895,000 keys per pass (Kafka's holds about 5 million). A pass whose
dirty part has more keys than that maps what fits and cleans up to there; the next pass goes on
from where this one stopped.
"""

from __future__ import annotations

import hashlib

BYTES_PER_ENTRY = 150
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024  # Kafka's log.cleaner.dedupe.buffer.size


def entries_for(buffer_bytes: int) -> int:
    """How many keys a map of `buffer_bytes` holds (at least one: a pass always progresses)."""
    return max(1, buffer_bytes // BYTES_PER_ENTRY)


DEFAULT_MAP_ENTRIES = entries_for(DEFAULT_DEDUPE_BUFFER_BYTES)


class OffsetMap:
    def __init__(self, max_entries: int = DEFAULT_MAP_ENTRIES) -> None:
        self.max_entries = max_entries
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    @staticmethod
    def _digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> bool:
        """Record `offset` for `key`; offsets arrive in log order, so the last one wins.

        False, and nothing recorded, when `key` is new and the map is full."""
        digest = self._digest(key)
        if len(self._latest) >= self.max_entries and digest not in self._latest:
            return False
        self._latest[digest] = offset
        return True

    def latest(self, key: bytes) -> int | None:
        return self._latest.get(self._digest(key))
