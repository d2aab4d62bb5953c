"""One log segment: batch bytes plus its sparse offset and time indexes.

``Segment`` holds everything that does not care where the bytes live; ``FileSegment``
keeps them in ``<base offset>.log`` (with ``.index`` and ``.timeindex`` beside it),
``MemorySegment`` in a bytearray for tests of other packages.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import struct
import threading
import time
from abc import ABC
from abc import abstractmethod
from bisect import bisect_left
from bisect import bisect_right
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import crc32c

from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import CONTROL_MASK
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import BatchHeader
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import parse_header
from storage.damage import DamageMap
from storage.damage import find_damage
from storage.errors import CorruptRecords
from storage.file_handles import HANDLES
from storage.fsutil import atomic_write
from storage.fsutil import fsync_dir
from storage.fsutil import write_synced
from storage.index import OffsetIndex
from storage.index import TimeIndex
from storage.non_data import NonDataRanges

# Relative offsets are int32 in the index files.
MAX_RELATIVE_OFFSET = 2**31 - 1
# `<base>.maxdatatimestamp`: the largest data timestamp, its batch's base offset and the segment
# size they describe. Written at seal only when a control batch holds the segment's largest
# timestamp (else the time index's last entry is the answer); Shoal's own file, not Kafka's.
DATA_MAX_SUFFIX = ".maxdatatimestamp"
# `<base>.nondata`: the segment's non-data ranges (storage.non_data), a cache of its headers.
NON_DATA_SUFFIX = ".nondata"
_DATA_MAX = struct.Struct(">qqq")
# Batch headers walked between two yields of `learn_data_max` (about 10 ms of parsing).
WALK_SLICE_BATCHES = 4096
# False: `locate` always walks headers, even to the batch just appended (the tests comparing
# the two set it).
TAIL_READ = True


def segment_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


class PendingSync:
    """A dirty segment's fsync, to run in another thread.

    The file is opened by path in that thread, one at a time: a flush of 10,000 dirty segments
    holds one extra descriptor, not 10,000, and a segment closed meanwhile is still synced (an
    fsync through any descriptor makes the file's written bytes durable) while one deleted
    meanwhile has nothing left to sync.
    """

    __slots__ = ("offset", "path", "segment")

    def __init__(self, segment: Segment, path: Path) -> None:
        self.segment = segment
        self.path = path
        self.offset = segment.next_offset  # what the sync makes durable: the log's recovery point

    def run(self) -> OSError | None:
        """fsync the file (any thread); the error, if the sync failed."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None  # deleted (its topic was): nothing to make durable
        except OSError as e:
            return e
        try:
            os.fsync(fd)
        except OSError as e:
            return e
        finally:
            os.close(fd)
        segment = self.segment
        if segment.durable_offset < self.offset:  # one attribute store: safe in a thread
            segment.durable_offset = self.offset
        return None


def sync_all(
    pending: list[PendingSync], stopping: threading.Event | None = None
) -> list[tuple[PendingSync, OSError]]:
    """Run the syncs one after another (in a thread); the ones that failed, with their error.

    Once `stopping` is set no new sync starts: the rest are neither done nor failed, and their
    segments' recovery points say so, which a close reads (`Segment.close_sync`) to sync them
    itself, in parallel. Only for a caller that acknowledges nothing (the flush duty)."""
    failed = []
    for p in pending:
        if stopping is not None and stopping.is_set():
            break
        error = p.run()
        if error is not None:
            failed.append((p, error))
    return failed


# What a segment learns from its batches (`Segment.reset_tracking`), but `next_offset`: a
# sealed segment opened lazily (`FileSegment`'s `loader`) has none of them until one is asked.
LAZY_ATTRIBUTES = frozenset({
    "max_timestamp", "max_timestamp_offset", "bytes_since_index", "offset_index", "time_index",
    "_tail_offsets", "_tail_positions", "damage", "max_data_timestamp", "max_data_offset",
    "data_max_known", "non_data", "non_data_known",
})  # fmt: skip


class Segment(ABC):
    def __init__(
        self, base_offset: int, index_interval_bytes: int, *, tracked: bool = True
    ) -> None:
        """`tracked`: False for a segment whose batches are learnt later (a lazy one)."""
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.size = 0
        self.dirty = False
        self._torn = False  # bytes past `size` from a failed write are still in the file
        self.roll_base_ms: int | None = None
        # Every offset below this is synced (an empty segment is): the log's recovery point.
        self.durable_offset = base_offset
        # The size the index files on disk describe (-1: none, or stale): a clean close
        # rewrites them only when the segment changed since they were saved or loaded.
        self.saved_size = -1
        if tracked:
            self.reset_tracking()
        else:
            self.next_offset = base_offset

    def reset_tracking(self) -> None:
        """Forget what was learnt from batches (before re-learning it by a scan)."""
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.max_timestamp_offset = 0
        self.bytes_since_index = 0
        self.offset_index = OffsetIndex()
        self.time_index = TimeIndex()
        # Base offset and position of each batch tracked since the last offset index entry:
        # consumers read at the tail, and without these every fetch there walks up to an index
        # interval of headers. Bounded by the index interval; rebuilt on any re-tracking.
        self._tail_offsets: list[int] = []
        self._tail_positions: list[int] = []
        self.damage = DamageMap()
        # ListOffsets MAX_TIMESTAMP answers from data batches only: share-state control batches
        # carry the broker's clock and would otherwise win. -1: no data batch seen.
        self.max_data_timestamp = -1
        self.max_data_offset = -1  # base offset of the first data batch holding it
        self.data_max_known = True  # False: only part of the segment was walked (see recovery)
        # Offsets holding no data record (storage.non_data), learnt from the same headers.
        self.non_data = NonDataRanges()
        self.non_data_known = True  # False: as data_max_known (saved beside it, or walked)

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1

    @property
    def loaded(self) -> bool:
        """What its batches say is known (false only for a sealed segment not used yet)."""
        return True

    def describe(self) -> str:
        """Where the segment lives, for log lines."""
        return f"memory segment {self.base_offset}"

    # --- storage primitives -----------------------------------------------------------

    @abstractmethod
    def read(self, position: int, size: int) -> bytes: ...

    @abstractmethod
    def _write(self, data: bytes | bytearray) -> None: ...

    @abstractmethod
    def truncate(self, size: int) -> None: ...

    def flush(self) -> None:
        """Make the appended bytes durable."""
        self.dirty = False
        self.durable_offset = self.next_offset

    def start_flush(self) -> PendingSync | None:
        """Mark the segment clean and hand back its fsync to run off the event loop.

        Cleared before the sync starts: an append during the sync leaves the segment dirty,
        so the next flush syncs it again. None when there is nothing to sync.
        """
        if not self.dirty:
            return None
        self.dirty = False
        return self._pending_sync()

    def close_sync(self) -> PendingSync | None:
        """The fsync a close needs: whatever the recovery point does not cover, whoever
        cleared the dirty flag (a flush duty whose round a stop cut short, a group commit)."""
        if not self.dirty and self.durable_offset >= self.next_offset:
            return None
        self.dirty = False
        return self._pending_sync()

    def _pending_sync(self) -> PendingSync | None:
        return None

    def seal(self) -> None:
        """The segment stops being active: finish and persist its indexes."""
        self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
        if self.durable_offset < self.next_offset:
            self.dirty = True  # a sync running elsewhere may not have finished: sync here too
        self.flush()

    def close(self) -> None:
        """Release resources; callers seal first for a clean shutdown."""
        return None

    def delete(self) -> None:
        """Remove the segment and its indexes."""
        self.truncate(0)

    # --- appending and indexing -------------------------------------------------------

    def append(self, data: bytes | bytearray, batches: list[tuple[int, BatchHeader]]) -> None:
        """Write ``data`` (whole batches, offsets already assigned) and index them.

        ``batches`` holds each batch's position within ``data`` and its header as
        parsed before offsets were assigned; offsets follow ``next_offset``.
        """
        start = self.size
        if self._torn:
            self.truncate(start)  # a failed write's tail could not be cut last time
            self._torn = False
        try:
            self._write(data)
        except OSError:
            # A partial batch must not stay: later appends would land after it and recovery
            # would cut everything from it on. Shrinking a file needs no space.
            self._torn = True
            self.truncate(start)
            self._torn = False
            raise
        self.size += len(data)
        track = self.track
        for pos, header in batches:
            track(start + pos, self.next_offset, header)
        self.damage.mark_verified(start, self.size)  # CRCs were checked on the way in
        self.dirty = True

    def track(self, position: int, base_offset: int, header: BatchHeader) -> None:
        """Account for one stored batch: indexes, max timestamp, next offset."""
        relative = base_offset - self.base_offset
        max_timestamp = header.max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.max_timestamp_offset = relative
        if header.attributes & CONTROL_MASK or not header.record_count:  # holds_data, inlined
            self.non_data.add(base_offset, base_offset + header.last_offset_delta)
        elif max_timestamp > self.max_data_timestamp:
            self.max_data_timestamp = max_timestamp
            self.max_data_offset = base_offset
        tail = self._tail_offsets
        if self.bytes_since_index > self.index_interval_bytes or (tail and base_offset <= tail[-1]):
            tail.clear()
            self._tail_positions.clear()
        if self.bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(relative, position)
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
            self.bytes_since_index = 0
        tail.append(base_offset)
        self._tail_positions.append(position)
        self.bytes_since_index += header.batch_length + LOG_OVERHEAD  # header.size, no call
        self.next_offset = base_offset + header.last_offset_delta + 1

    def note_data_max(self, timestamp: int, base_offset: int) -> None:
        """Merge a data maximum learnt elsewhere (a saved file, a walk); ties keep the first."""
        if timestamp > self.max_data_timestamp or (
            timestamp == self.max_data_timestamp and 0 <= base_offset < self.max_data_offset
        ):
            self.max_data_timestamp, self.max_data_offset = timestamp, base_offset

    def data_max(self) -> tuple[int, int] | None:
        """(largest data timestamp, base offset of the first batch holding it); None: no data."""
        for _ in self.learn_data_max():
            pass
        if self.max_data_offset < 0:
            return None
        return self.max_data_timestamp, self.max_data_offset

    def learn_data_max(self) -> Iterator[None]:
        """Complete a partial data maximum (a segment opened from indexes with no saved one),
        yielding now and then so that a caller on the event loop can let others run.

        When the batch holding the segment's largest timestamp is a data batch, it is the
        answer: one header read. Otherwise (a segment written before the maximum was saved)
        one header walk; the result stays in memory, and is saved when the segment is sealed.
        """
        if self.data_max_known:
            return
        found = None
        if self.max_timestamp >= 0:  # known from the indexes (else nothing was tracked)
            with contextlib.suppress(CorruptRecords):  # a damaged batch: walk instead
                found = self.locate(self.base_offset + self.max_timestamp_offset)
        if found is not None and found[1].holds_data:
            self.note_data_max(found[1].max_timestamp, found[1].base_offset)
        else:
            for n, (_, header) in enumerate(self.iter_headers(), 1):
                if header.holds_data:
                    self.note_data_max(header.max_timestamp, header.base_offset)
                if n % WALK_SLICE_BATCHES == 0:
                    yield
        self.data_max_known = True

    def forget_data_max(self) -> None:
        """The batch named as holding the data maximum turned out damaged: learn it again by
        a walk, which steps over the damage now recorded (`learn_data_max`)."""
        self.max_data_timestamp = self.max_data_offset = -1
        self.data_max_known = False

    def learn_non_data(self) -> Iterator[None]:
        """Complete the non-data ranges of a segment opened from saved indexes with no saved
        ranges (or stale ones): one header walk, yielding now and then as `learn_data_max`.
        The result is saved beside the segment (a file segment), so the walk is done once."""
        if self.non_data_known:
            return
        ranges = NonDataRanges()
        for n, (_, header) in enumerate(self.iter_headers(), 1):
            if not header.holds_data:
                ranges.add(header.base_offset, header.last_offset)
            if n % WALK_SLICE_BATCHES == 0:
                yield
        # Batches appended meanwhile were walked too: the walk reads to the current end.
        self.non_data, self.non_data_known = ranges, True
        self.save_non_data()

    def save_non_data(self) -> None:
        """Hook: a file segment keeps its ranges beside it."""
        return None

    def non_data_count(self, start: int, end: int) -> int:
        """Non-data offsets of `[start, end)` in this segment (as far as it knows them)."""
        return self.non_data.count(start, end)

    def fits(self, record_count: int) -> bool:
        return self.next_offset + record_count - 1 - self.base_offset <= MAX_RELATIVE_OFFSET

    # --- reading ----------------------------------------------------------------------

    def iter_headers(
        self, position: int = 0, *, strict: bool = False
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the stored batches from ``position``, read in index-interval chunks.

        A damaged stretch (known, or found here: a header that does not parse, a length past
        the end, an offset that does not follow) is recorded and stepped over; with ``strict``
        the walk raises InvalidRecordBatch instead (open-time checks that fall back to a scan).
        A walk from a batch whose offset is known (the segment's start, an index entry) checks
        its first batch too: a base offset is outside the CRC, so continuity is its only check.
        """
        chunk = self.index_interval_bytes + 2 * BATCH_HEADER_SIZE
        expected = self._anchor(position)
        while position < self.size:
            hole = self.damage.at_position(position)
            if hole is not None:
                position, expected = hole.end, hole.last_offset + 1
                continue
            ahead = self.damage.next_from(position)
            stop = ahead.start if ahead is not None else self.size
            buf = self.read(position, min(chunk, stop - position))
            pos, bad = 0, "length" if stop - position < BATCH_HEADER_SIZE else None
            while bad is None and len(buf) - pos >= BATCH_HEADER_SIZE:
                try:
                    header = parse_header(buf, pos)
                except InvalidRecordBatch as e:
                    bad = e.reason
                    break
                if expected is not None and header.base_offset != expected:
                    bad = "offset"
                elif position + pos + header.size > stop:
                    bad = "length"
                else:
                    yield position + pos, header  # the header is enough to step over it
                    expected = header.last_offset + 1
                    pos += header.size
            if bad is not None:
                if strict:
                    raise InvalidRecordBatch(bad, f"{bad} at {position + pos} of {self.describe()}")
                at = position + pos
                start = expected if expected is not None else self.offset_at(at)
                find_damage(self, at, start, self.next_offset, bad)
            position += pos

    def _anchor(self, position: int) -> int | None:
        """The base offset of the batch at ``position`` if the segment knows it without
        reading it: the segment's start, an offset index entry, a tracked tail batch."""
        if position == 0:
            return self.base_offset
        positions = self.offset_index.positions
        i = bisect_left(positions, position)
        if i < len(positions) and positions[i] == position:
            return self.base_offset + self.offset_index.offsets[i]
        tail = self._tail_positions
        i = bisect_left(tail, position)
        if i < len(tail) and tail[i] == position:
            return self._tail_offsets[i]
        return None

    def offset_at(self, position: int) -> int:
        """The offset a batch at ``position`` should start with (a short walk from the index)."""
        index = self.offset_index
        i = bisect_right(index.positions, position) - 1
        pos, expected = (index.positions[i], index.offsets[i]) if i >= 0 else (0, 0)
        expected += self.base_offset
        while pos < position:
            hole = self.damage.at_position(pos)
            if hole is not None:
                pos, expected = hole.end, hole.last_offset + 1
                continue
            try:
                header = parse_header(self.read(pos, BATCH_HEADER_SIZE))
            except InvalidRecordBatch:
                break
            pos, expected = pos + header.size, header.last_offset + 1
        return expected

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch holding ``offset``: one bisect, a short walk.

        :raises CorruptRecords: ``offset`` lies in a damaged stretch.
        """
        i = bisect_right(self._tail_offsets, offset) - 1
        if i >= 0 and self._tail_positions[i] < self.size:
            start = self._tail_positions[i]  # the batch itself, or one before it
            if TAIL_READ and self._tail_offsets[i] == offset and not self.damage:
                # The batch just appended (a steady-rate reader's next offset): its header
                # alone, as the walk below would find it first, without the walk's set-up.
                found = self._tail_header(start, offset)
                if found is not None:
                    return found
        else:
            start = self.offset_index.lookup(offset - self.base_offset)
        found = None
        for position, header in self.iter_headers(start):
            if header.last_offset >= offset:
                found = position, header
                break
        hole = self.damage.at_offset(offset)
        if hole is not None:
            raise CorruptRecords(hole.first_offset, hole.last_offset, self.describe())
        return found

    def _tail_header(self, position: int, offset: int) -> tuple[int, BatchHeader] | None:
        """The header at `position` of the tracked batch starting at `offset`, if it reads as
        that batch (else None: the walk looks again, and records any damage it finds)."""
        try:
            header = parse_header(self.read(position, BATCH_HEADER_SIZE))
        except InvalidRecordBatch:
            return None
        if header.base_offset != offset or position + header.size > self.size:
            return None
        return position, header

    def verify(self, position: int, data: bytes) -> int:
        """How much of ``data`` (whole batches read at ``position``) holds intact batches.

        Each byte's CRC is checked once: the first read of a batch checks it, later reads
        find it in the checked ranges. The first batch that is not intact (a header that does
        not parse, a length past the data, an offset that does not follow, a CRC that fails)
        is recorded as damaged and the read stops before it; nothing here raises.
        """
        if self.damage.verified(position, position + len(data)):
            return len(data)
        view = memoryview(data)
        end = len(data)
        good = 0
        expected: int | None = None
        reason = None
        while good < end:
            try:
                header = parse_header(view, good)
            except InvalidRecordBatch as e:
                reason = e.reason
                break
            at, size = position + good, header.size
            if good + size > end:
                reason = "length"
            elif expected is not None and header.base_offset != expected:
                reason = "offset"
            elif not self.damage.verified(at, at + size) and (
                crc32c.crc32c(view[good + ATTRIBUTES_POS : good + size]) != header.crc
            ):
                reason = "crc"
                if expected is None:  # the batch a read located: its offset was checked
                    expected = header.base_offset
            if reason is not None:
                break
            good += size
            expected = header.last_offset + 1
        self.damage.mark_verified(position, position + good)
        if reason is not None:
            at = position + good
            start = expected if expected is not None else self.offset_at(at)
            find_damage(self, at, start, self.next_offset, reason)
        return good

    def find_timestamp(self, timestamp: int, from_offset: int = 0) -> BatchHeader | None:
        """First batch ending at or after ``from_offset`` whose maxTimestamp >= ``timestamp``."""
        if self.max_timestamp < timestamp or from_offset >= self.next_offset:
            return None
        relative = self.time_index.scan_start(timestamp)
        start = 0 if relative is None else self.offset_index.lookup(relative)
        if from_offset > self.base_offset:
            start = max(start, self.offset_index.lookup(from_offset - self.base_offset))
        for _, header in self.iter_headers(start):
            if header.max_timestamp >= timestamp and header.last_offset >= from_offset:
                return header
        return None


class MemorySegment(Segment):
    def __init__(self, base_offset: int, index_interval_bytes: int) -> None:
        super().__init__(base_offset, index_interval_bytes)
        self._data = bytearray()

    def read(self, position: int, size: int) -> bytes:
        return bytes(self._data[position : position + size])

    def _write(self, data: bytes | bytearray) -> None:
        self._data += data

    def truncate(self, size: int) -> None:
        del self._data[size:]
        self.size = size


def _write_or_remove(path: Path, data: bytes | None) -> None:
    if data is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, data)


def _write_cache(path: Path, data: bytes | None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        if data is not None:
            tmp.write_bytes(data)
            os.replace(tmp, path)
            return
    except OSError:  # a full disk: learnt again when next needed
        pass
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
        path.unlink(missing_ok=True)


def write_files(files: list[tuple[Path, bytes | None]], *, synced: bool = True) -> None:
    """Write (atomically: each synced, then renamed into place) or remove each file, by path,
    then sync their directories once each (not once a file: a stop writes a few files in each
    of thousands of directories); safe in any thread. Not `synced`: caches (`cache_files`),
    renamed into place unsynced, and removed where that fails.

    :raises OSError: a write or a sync failed (never for caches).
    """
    if not synced:
        for path, data in files:
            _write_cache(path, data)
        return
    directories: dict[Path, None] = {}
    for path, data in files:
        if data is None:
            path.unlink(missing_ok=True)
            continue
        tmp = path.with_name(path.name + ".tmp")
        try:
            write_synced(tmp, data)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk must not keep the half-written copy
            raise
        os.replace(tmp, path)
        directories[path.parent] = None
    for directory in directories:
        fsync_dir(directory)


class FileSegment(Segment):
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        *,
        loader: Callable[[FileSegment], None] | None = None,
    ) -> None:
        """`loader`: a sealed segment opened lazily, as Kafka's `LazyIndex` defers its index
        files: nothing is read (its indexes, a walk of its tail) until something its batches
        say is first asked for (`LAZY_ATTRIBUTES`); then `loader` learns it all. Its
        `next_offset` is the caller's to set (thousands of logs open at a start: a clean one
        costs a file listing per partition, not reads per segment)."""
        super().__init__(base_offset, index_interval_bytes, tracked=loader is None)
        self._loader = loader
        self.directory = directory
        self.log_path = directory / f"{segment_stem(base_offset)}.log"
        self._handle_key = str(self.log_path)  # HANDLES's key, made once
        self._closed = False
        try:  # no descriptor for an existing file: opening thousands at start churns HANDLES
            stat = os.stat(self._handle_key)
        except FileNotFoundError:
            stat = os.fstat(self._fd)  # a new segment: created here
        self.size = stat.st_size
        # After a restart we only know when the file was last written: rolling by age
        # from then errs on the side of rolling later.
        self.roll_base_ms = stat.st_mtime_ns // 1_000_000 if self.size else None
        if loader is None:
            # Bytes nobody has tracked yet (recovery, or a segment swapped in whole, tracks
            # them): the data maximum is learnt when first asked.
            self.data_max_known = self.size == 0
            self.non_data_known = self.size == 0

    # Paths of the files beside the log, made when first used (a lazy segment may never).
    @functools.cached_property
    def index_path(self) -> Path:
        return self.log_path.with_suffix(".index")

    @functools.cached_property
    def time_index_path(self) -> Path:
        return self.log_path.with_suffix(".timeindex")

    @functools.cached_property
    def data_max_path(self) -> Path:
        return self.log_path.with_suffix(DATA_MAX_SUFFIX)

    @functools.cached_property
    def non_data_path(self) -> Path:
        return self.log_path.with_suffix(NON_DATA_SUFFIX)

    @property
    def loaded(self) -> bool:
        return self._loader is None

    def load(self) -> None:
        """Learn what a lazily opened segment's batches say, now (no-op once loaded).

        :raises OSError: a read failed; tried again at the next use.
        """
        loader = self._loader
        if loader is None:
            return
        self._loader = None  # the loader itself reads the attributes it sets
        next_offset, max_timestamp = self.next_offset, self.__dict__.get("max_timestamp")
        try:
            loader(self)
        except BaseException:  # as it was before: what a failed walk learnt is partial
            for name in LAZY_ATTRIBUTES:
                self.__dict__.pop(name, None)
            self.next_offset = next_offset
            if max_timestamp is not None:
                self.max_timestamp = max_timestamp
            self._loader = loader
            raise

    if not TYPE_CHECKING:  # hidden from mypy: every other attribute stays checked

        def __getattr__(self, name: str) -> object:
            """Only for an attribute not set: one of a lazy segment's, first asked for."""
            if name not in LAZY_ATTRIBUTES or self.__dict__.get("_loader") is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            self.load()
            return object.__getattribute__(self, name)

    def describe(self) -> str:
        return str(self.log_path)

    @property
    def _fd(self) -> int:
        """Opened on demand: idle segments hold no descriptor (storage.file_handles)."""
        if self._closed:  # never re-create the file of a closed or deleted segment
            raise OSError(errno.EBADF, f"{self.log_path} is closed")
        return HANDLES.fd(self._handle_key)

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def _write(self, data: bytes | bytearray) -> None:
        fd = self._fd
        written = os.write(fd, data)
        if written < len(data):  # a short write: rare (a signal, a nearly full disk)
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view) :]

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self.size = size
        self.dirty = True

    def flush(self) -> None:
        if self.dirty:
            self.dirty = False  # before the sync: a failed sync raises and leaves it dirty
            try:
                os.fsync(self._fd)
            except OSError:
                self.dirty = True
                raise
            self.durable_offset = self.next_offset

    def _pending_sync(self) -> PendingSync | None:
        return PendingSync(self, self.log_path)

    def seal(self) -> None:
        super().seal()
        self.save_indexes()

    def save_indexes(self) -> None:
        for path, data in self.index_files():
            _write_or_remove(path, data)
        self.saved_size = self.size

    def index_files(self, *, caches: bool = True) -> list[tuple[Path, bytes | None]]:
        """The index files as they should be now (None: the file should not exist), and with
        `caches` the `cache_files`. Reads the segment (the data maximum may need a header
        walk): call it on the event loop, and write them anywhere (`write_files`)."""
        files: list[tuple[Path, bytes | None]] = [
            (self.index_path, self.offset_index.to_bytes()),
            (self.time_index_path, self.time_index.to_bytes()),
        ]
        return [*files, *self.cache_files()] if caches else files

    def cache_files(self) -> list[tuple[Path, bytes | None]]:
        """The files beside it that need no sync (`write_files(synced=False)`): each says
        which segment size it describes, so a lost, torn or stale one only costs a header
        walk when it is next needed."""
        return [
            (self.data_max_path, self._data_max_file()),
            (
                self.non_data_path,
                self.non_data.to_bytes(self.size) if self.non_data_known else None,
            ),
        ]

    def _data_max_file(self) -> bytes | None:
        """Keep the data maximum across a clean restart, which walks no more than a tail.

        Only a segment whose largest timestamp is a control batch's needs the file: otherwise
        the time index's last entry names the data batch (`learn_data_max`).
        """
        found = self.data_max()
        max_batch = self.base_offset + self.max_timestamp_offset
        if self.size == 0 or (found is not None and found[1] == max_batch):
            return None
        timestamp, offset = found if found is not None else (-1, -1)
        return _DATA_MAX.pack(timestamp, offset, self.size)

    def load_data_max(self) -> None:
        """Adopt the saved data maximum if it describes this segment as it is now."""
        try:
            timestamp, offset, size = _DATA_MAX.unpack(self.data_max_path.read_bytes())
        except (OSError, struct.error):
            return
        if size == self.size:
            if offset >= 0:
                self.note_data_max(timestamp, offset)
            self.data_max_known = True

    def save_non_data(self) -> None:
        """Keep the non-data ranges across a restart. Written unsynced: a lost or torn file
        only costs a header walk at the next start (its CRC and size are checked)."""
        data = self.non_data.to_bytes(self.size) if self.non_data_known else None
        _write_cache(self.non_data_path, data)

    def load_non_data(self) -> None:
        """Adopt the saved ranges if they describe this segment as it is now."""
        try:
            data = self.non_data_path.read_bytes()
        except OSError:
            return
        ranges = NonDataRanges.from_bytes(data, self.size)
        if ranges is not None:
            self.non_data, self.non_data_known = ranges, True

    def close(self) -> None:
        self._closed = True
        HANDLES.close(self.log_path)

    def delete(self) -> None:
        self.close()
        for path in (
            self.log_path, self.index_path, self.time_index_path, self.data_max_path,
            self.non_data_path,
        ):  # fmt: skip
            path.unlink(missing_ok=True)

    def save_aside(self, position: int) -> Path:
        """Copy bytes from ``position`` to the end into ``<name>.log.corrupt-<ms>``."""
        stamp = time.time_ns() // 1_000_000
        target = self.log_path.with_name(f"{self.log_path.name}.corrupt-{stamp}")
        with target.open("wb") as out:
            while position < self.size:
                chunk = self.read(position, min(1 << 20, self.size - position))
                out.write(chunk)
                position += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        return target
