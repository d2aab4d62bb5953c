"""Where the cleaner writes a segment's cleaned copy, and how the copy replaces it.

A file segment ``B.log`` is cleaned into ``B.log.cleaned`` (+ ``B.index.cleaned``,
``B.timeindex.cleaned``) in the cleaner's thread; once they are whole and fsynced they are
renamed to ``.swap``, indexes first and the log last: ``B.log.swap`` existing is the commit
point. On the event loop the swaps replace the originals (``os.replace``, indexes first), and
the Segment object in the log is exchanged. At open, `finish_interrupted_cleaning` completes a
committed swap and removes everything else, so a kill -9 at any point leaves either the old
segment or the cleaned one, never a mix: when in doubt the indexes are removed and rebuilt by
the open-time scan (they are derived data).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from storage.file_handles import HANDLES
from storage.fsutil import fsync_dir
from storage.fsutil import write_synced
from storage.segment import DATA_MAX_SUFFIX
from storage.segment import NON_DATA_SUFFIX
from storage.segment import FileSegment
from storage.segment import MemorySegment
from storage.segment import Segment
from storage.segment import segment_stem

CLEANED = ".cleaned"
SWAP = ".swap"
_SUFFIXES = (".log", ".index", ".timeindex")


class CleanedCopy(Protocol):
    """A segment being written by the cleaner (`segment` tracks offsets and indexes)."""

    @property
    def segment(self) -> Segment: ...

    def finish(self) -> None:
        """Make the copy durable and commit it (cleaner thread)."""
        ...

    def install(self) -> Segment:
        """Put the committed copy in place of the original's files (event loop, quick)."""
        ...

    def release(self) -> None:
        """Let go of the replaced original (any thread: freeing its blocks can take a while)."""
        ...

    def discard(self) -> None: ...


class MemoryCopy:
    def __init__(self, base_offset: int, index_interval_bytes: int) -> None:
        self.segment: Segment = MemorySegment(base_offset, index_interval_bytes)

    def finish(self) -> None:
        self.segment.seal()

    def install(self) -> Segment:
        return self.segment

    def release(self) -> None:
        return None

    def discard(self) -> None:
        return None


class _WriteOnlySegment(Segment):
    """Appends to ``B.log.cleaned`` through its own descriptor (never the shared handles:
    the cleaner thread must not evict descriptors the event loop is using)."""

    def __init__(self, path: Path, base_offset: int, index_interval_bytes: int) -> None:
        super().__init__(base_offset, index_interval_bytes)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def read(self, position: int, size: int) -> bytes:
        raise OSError("a segment being cleaned is not read")

    def _write(self, data: bytes | bytearray) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size

    def flush(self) -> None:
        os.fsync(self.fd)
        self.dirty = False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class FileCopy:
    def __init__(self, original: FileSegment) -> None:
        self.directory = original.directory
        self.stem = segment_stem(original.base_offset)
        self.interval = original.index_interval_bytes
        self._writer = _WriteOnlySegment(
            self._path(".log", CLEANED), original.base_offset, self.interval
        )
        self._held: list[int] = []  # descriptors of the replaced file, closed by release()

    @property
    def segment(self) -> Segment:
        return self._writer

    def _path(self, suffix: str, stage: str = "") -> Path:
        return self.directory / f"{self.stem}{suffix}{stage}"

    def finish(self) -> None:
        writer = self._writer
        writer.seal()  # the last time-index entry, and an fsync of the log
        writer.close()
        write_synced(self._path(".index", CLEANED), writer.offset_index.to_bytes())
        write_synced(self._path(".timeindex", CLEANED), writer.time_index.to_bytes())
        # The original's saved data maximum may name a record this copy removed; without it
        # the copy's maximum is learnt from its own headers when first asked.
        self._path(DATA_MAX_SUFFIX).unlink(missing_ok=True)
        self._path(NON_DATA_SUFFIX).unlink(missing_ok=True)  # the original's: saved at install
        for suffix in (".index", ".timeindex", ".log"):  # the log last: the commit point
            os.replace(self._path(suffix, CLEANED), self._path(suffix, SWAP))
        fsync_dir(self.directory)

    def install(self) -> Segment:
        log = self._path(".log")
        # Held open across the rename, so the replaced file's blocks are freed by release()
        # in a thread, not by the rename or a close on the event loop.
        self._held = [os.open(log, os.O_RDONLY)]
        cached = HANDLES.detach(log)  # the cached descriptor is the replaced file's
        if cached is not None:
            self._held.append(cached)
        for suffix in (".index", ".timeindex", ".log"):
            os.replace(self._path(suffix, SWAP), self._path(suffix))
        writer = self._writer
        segment = FileSegment(self.directory, writer.base_offset, self.interval)
        segment.next_offset = writer.next_offset
        segment.max_timestamp = writer.max_timestamp
        segment.max_timestamp_offset = writer.max_timestamp_offset
        segment.offset_index, segment.time_index = writer.offset_index, writer.time_index
        segment.max_data_timestamp = writer.max_data_timestamp
        segment.max_data_offset = writer.max_data_offset
        segment.data_max_known = True  # tracked batch by batch as the copy was written
        segment.non_data, segment.non_data_known = writer.non_data, True
        segment.save_non_data()
        segment.damage.mark_verified(0, segment.size)  # CRCs were checked as it was written
        return segment

    def release(self) -> None:
        held, self._held = self._held, []
        for fd in held:
            os.close(fd)

    def discard(self) -> None:
        self._writer.close()
        for suffix in _SUFFIXES:
            for stage in (CLEANED, SWAP):
                self._path(suffix, stage).unlink(missing_ok=True)


def finish_interrupted_cleaning(directory: Path) -> list[str]:
    """At open, before the segments are read: complete committed swaps, remove the rest.

    Returns one line per segment touched, for the recovery log."""
    done: list[str] = []
    for swap in sorted(directory.glob(f"*.log{SWAP}")):
        stem = swap.name.split(".")[0]
        log = directory / f"{stem}.log"
        for suffix in (".index", ".timeindex", NON_DATA_SUFFIX):  # rebuilt by the scan
            (directory / f"{stem}{suffix}").unlink(missing_ok=True)
            (directory / f"{stem}{suffix}{SWAP}").unlink(missing_ok=True)
        if log.exists():
            os.replace(swap, log)
            done.append(f"{log.name}: cleaned copy swapped in")
        else:  # retention removed the original meanwhile
            swap.unlink()
            done.append(f"{swap.name}: original gone, copy removed")
    leftovers = [*directory.glob(f"*{CLEANED}"), *directory.glob(f"*{SWAP}")]
    for stem in sorted({p.name.split(".")[0] for p in leftovers}):
        for suffix in (".index", ".timeindex"):  # a rename may have landed: rebuild them
            (directory / f"{stem}{suffix}").unlink(missing_ok=True)
        done.append(f"{stem}.log: unfinished cleaning removed")
    for path in leftovers:
        path.unlink(missing_ok=True)
    if done:
        fsync_dir(directory)
    return done
