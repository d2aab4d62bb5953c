"""Producer ids for InitProducerId, unique across restarts.

Ids are handed out from blocks; the end of the current block is written to disk before any id
in it is used, so a restarted broker never repeats one (which would defeat de-duplication).
"""

from __future__ import annotations

import os
from pathlib import Path

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
            _write_atomically(self._path, str(self._limit).encode())
        pid = self._next
        self._next += 1
        return pid


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
