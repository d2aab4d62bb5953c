"""A bounded set of open segment files, least recently used closed first.

A broker with 10,000 partitions has at least 10,000 segment files; holding a descriptor for each
would exceed the default `ulimit -n` (1024). Segments ask for their descriptor at each use and
the least recently used one is closed when the set is full. Closing loses nothing: written bytes
are in the page cache, and an fsync through a descriptor opened later syncs them all the same.
"""

from __future__ import annotations

import os
import resource
from collections import OrderedDict
from pathlib import Path


def default_capacity() -> int:
    """Half the process's descriptor limit: the rest is for sockets and other files."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, soft // 2)


class FileHandles:
    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity or default_capacity()
        # By path as a str: a Path's hash is a Python call, and `fd` runs on every append.
        self._open: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def fd(self, path: str) -> int:
        """An open read-write, append descriptor of `path` (created if missing)."""
        fd = self._open.get(path)
        if fd is not None:
            self._open.move_to_end(path)
            return fd
        while len(self._open) >= self.capacity:
            _, oldest = self._open.popitem(last=False)
            os.close(oldest)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._open[path] = fd
        return fd

    def detach(self, path: Path | str) -> int | None:
        """Forget `path`'s descriptor without closing it: the caller closes it (a thread can,
        when closing frees a replaced file's blocks)."""
        return self._open.pop(str(path), None)

    def close(self, path: Path | str) -> None:
        fd = self._open.pop(str(path), None)
        if fd is not None:
            os.close(fd)


HANDLES = FileHandles()
