"""Small durable-file helpers."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """Create or truncate `path`, write `data` and fsync it (the directory entry is not)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write tmp, fsync, rename, fsync the directory: readers see old or new, never half."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        write_synced(tmp, data)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep the half-written copy
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)
