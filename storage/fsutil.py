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


PRIVATE = 0o600  # files of secrets and access rules: the broker's user only


def write_synced(path: Path, data: bytes, mode: int | None = None) -> None:
    """Create or truncate `path`, write `data` and fsync it (the directory entry is not).

    `mode`: the file's permissions from the first byte on, whatever the umask or an old file
    left there had (PRIVATE for secrets); None: 0644 under the umask.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write tmp, fsync, rename, fsync the directory: readers see old or new, never half.

    `mode`: as for `write_synced`; the tmp file has it before any byte is written."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        write_synced(tmp, data, mode)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep the half-written copy
        raise
    os.replace(tmp, path)
    fsync_dir(path.parent)


# Which version of a file `atomic_write` left: each write renames a new inode into place, so
# inode, modification time and size together tell a reader that it changed, even when two
# writes fall within one tick of the file system's clock.
FileStamp = tuple[int, int, int]


def file_stamp(path: Path) -> FileStamp | None:
    """The stamp of the file at `path` now (a stat); None if there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def read_stamped(path: Path) -> tuple[FileStamp, bytes] | None:
    """The file's content and the stamp of that very content (read from one open file, so a
    replacement meanwhile cannot pair an old stamp with new bytes); None if there is none."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            return (st.st_ino, st.st_mtime_ns, st.st_size), f.read()
    except FileNotFoundError:
        return None
