"""Producer ids for InitProducerId, unique across restarts.

Ids are handed out from blocks; the end of the current block is written to disk before any id
in it is used, so a restarted broker never repeats one (which would defeat de-duplication).
"""

from __future__ import annotations

from pathlib import Path

from storage.fsutil import atomic_write

BLOCK = 1000


class ProducerIdAllocator:
    def __init__(self, path: Path) -> None:
        self._path = path
        start = int(path.read_text()) if path.exists() else 0
        self._next = start
        self._limit = start

    def allocate(self) -> int:
        if self._next >= self._limit:
            self._limit = self._next + BLOCK
            atomic_write(self._path, str(self._limit).encode())
        pid = self._next
        self._next += 1
        return pid
