"""The cleaner's key -> latest offset map (Kafka's SkimpyOffsetMap, without its fixed buffer).

Keys are stored by their 16-byte MD5 digest, as Kafka does: a long key costs no more than a
short one, and a collision (of MD5 over one partition's keys) is not a practical concern.
"""

from __future__ import annotations

import hashlib


class OffsetMap:
    def __init__(self) -> None:
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    @staticmethod
    def _digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` for `key`; offsets arrive in log order, so the last one wins."""
        self._latest[self._digest(key)] = offset

    def latest(self, key: bytes) -> int | None:
        return self._latest.get(self._digest(key))
