"""The data dir's `.lock`: one broker per data dir, and offline tools know when one runs.

The broker holds an exclusive `flock` on `<data_dir>/.lock` while it runs (as Kafka does with
its log dirs' `.lock`): a second broker on the same data dir refuses to start instead of
appending to the same segments. The kernel drops the lock when the process dies, kill -9
included, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from storage.errors import StorageException

LOCK_FILE = ".lock"


class DataDirLocked(StorageException, OSError):
    """Another process (a running broker) holds the data dir's lock."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(errno.EAGAIN, f"{data_dir} is in use by a running broker")


class DataDirLock:
    """The exclusive lock, held from construction until `release()`.

    :raises DataDirLocked: another process holds it.
    """

    def __init__(self, data_dir: Path) -> None:
        self._fd: int | None = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise DataDirLocked(data_dir) from None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def is_locked(data_dir: Path) -> bool:
    """True while a broker holds the data dir (checked without taking or creating anything)."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
