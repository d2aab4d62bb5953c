"""Log compaction: keep the latest record of each key in the sealed segments of a log.

One pass over a compacted log (``cleanup.policy`` holds ``compact``):

1. `plan_cleaning` (event loop, header facts only): the sealed segments old enough for
   ``min.compaction.lag.ms`` and free of known damage, oldest first; the pass runs when the
   dirty part (segments written since the last pass) is at least ``min.cleanable.dirty.ratio``
   of them. The active segment is never cleaned.
2. `run_cleaning` (a thread: sealed segments are immutable): an `OffsetMap` of key -> latest
   offset over the dirty records, then a cleaned copy of every planned segment
   (`storage.cleaned_segment`), committed as ``.swap`` files. A segment that loses nothing is
   not rewritten. The map holds at most ``log.cleaner.dedupe.buffer.size`` worth of keys (as
   Kafka): when it fills, the pass cleans only up to the first record it could not map
   (`CleaningResult.end_offset`) and the next pass goes on from there.
3. `swap_one` per segment (event loop, three renames; the broker yields between segments):
   each copy replaces its segment if that segment is still in the log. Reads before the swap
   see the old segment, after it the new one; both hold every surviving record at its offset.
   The replaced file is held open and let go of in the thread (`release_replaced`): freeing
   its blocks is not the loop's work.

What a cleaned segment looks like. Kafka keeps a filtered batch's base and last offset with
records missing inside it; a share-partition could then not tell from headers which offsets
are gone. Here every run of surviving records of a batch becomes a batch of its own, and every
run of removed offsets becomes an *empty batch* (a 61-byte header with recordCount 0 whose
offsets say what is gone). Offsets stay contiguous batch to batch, so the open-time scan,
the damage checks and the indexes work unchanged, and a share-partition archives the offsets
of an empty batch like those of a control batch, from headers alone. Adjacent removed runs
merge into one empty batch, across original batches, so a cleaned log costs at most two
headers per surviving run; cleaning a cleaned segment again keeps its size. A surviving run
keeps its batch's producer id, epoch and codec, with the base sequence moved by the records
cut before it: producer de-duplication comes from the producer snapshot and the active
segment, which cleaning never touches.

Rules: a record is removed when a later record of its key exists, or when it is a tombstone
(null value) whose batch is older than ``delete.retention.ms``. Records without a key (written
before the topic became compacted) are kept. Control batches (share state) at or after the
Earliest Share Offset are kept whole; those wholly below it are removed; with no ESO known for
the partition every control batch is kept.

Transactions, as Kafka's `LogCleaner` treats them: nothing at or above the last stable offset is
cleaned (`UnifiedLog.firstUncleanableOffset`: an open transaction's outcome is not known yet);
the batches of aborted transactions (the partition's aborted index, taken when the pass is
planned) are removed whole and never enter the offset map, so an aborted record never
supersedes a committed one; a kept run keeps its batch's attributes (the transactional bit).
A transaction marker (a control batch with a producer id) is removed as Kafka's `LogCleaner`
removes one (`CleanedTransactionMetadata.onControlBatchRead`, `checkBatchRetention`): only
when the pass read no batch of its transaction (every record of it was removed by an earlier
pass: a COMMIT marker removed while its records remain would leave them looking open to the
producer-state rebuild) and `delete.retention.ms` has passed since it was written (Kafka's
delete horizon; consumers behind by less still find it). A removed ABORT marker's transaction
leaves the aborted index first, durably (`forget_aborted`, before the swap): a read_committed
consumer told of it would look for the marker.

Batches of every codec are read (gzip, snappy, lz4,
zstd: `protocol.codecs`), and a surviving run is re-encoded with its batch's own codec. Batches
the cleaner cannot read (records that do not decompress or parse) are kept whole and counted:
nothing is dropped unread. A CRC
that fails aborts the pass for that log, which stays as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field

import crc32c

from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import BatchHeader
from protocol.record_batch import ControlRecordType
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import iter_batch_headers
from protocol.record_batch import parse_header
from protocol.records import Record
from protocol.records import StoredBatch
from protocol.records import build_stored_batch
from protocol.records import decode_records
from protocol.records import encode_run
from protocol.txn_markers import marker_type
from storage.base_log import SegmentedLog
from storage.cleaned_segment import CleanedCopy
from storage.config import LogConfig
from storage.damage import find_damage
from storage.errors import StorageException
from storage.offset_map import DEFAULT_MAP_ENTRIES
from storage.offset_map import OffsetMap
from storage.segment import FileSegment
from storage.segment import Segment

READ_CHUNK_BYTES = 4 * 1024 * 1024
_INT32_MAX = 2**31 - 1
_Read = Callable[[int, int], bytes]
# Producer id -> (first offset, ABORT marker's offset) of its aborted transactions.
AbortedRanges = dict[int, tuple[tuple[int, int], ...]]


class SegmentDamaged(StorageException):
    """A batch of a sealed segment is damaged (a header that does not parse, a length past
    the end, an offset that does not follow, a CRC that fails), found while cleaning it: the
    pass stops, and the caller records the damage on the event loop (`record_found_damage`),
    so that the segment is not planned again."""

    def __init__(self, segment: Segment, position: int, reason: str) -> None:
        super().__init__(f"{reason} at {position} of {segment.describe()}")
        self.segment = segment
        self.position = position
        self.reason = reason


def record_found_damage(error: SegmentDamaged) -> None:
    """Record (log once, count) the damage a pass found; event loop only, as every reader's
    damage is recorded. A segment gone meanwhile (retention) has nothing left to record."""
    segment = error.segment
    with contextlib.suppress(OSError):
        expected = segment.offset_at(error.position)
        find_damage(segment, error.position, expected, segment.next_offset, error.reason)


@dataclass(frozen=True, slots=True)
class CleaningJob:
    log: SegmentedLog
    segments: tuple[Segment, ...]  # sealed and cleanable, oldest first
    dirty_from: int  # segments[dirty_from:] were written since the last pass
    eso: int | None  # control batches from here on are kept
    now_ms: int
    config: LogConfig
    first_dirty: int = 0  # records below it were mapped by an earlier pass
    map_entries: int = DEFAULT_MAP_ENTRIES  # the offset map's bound
    aborted: AbortedRanges = field(default_factory=dict)  # the aborted transactions met

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether a transactional data batch belongs to an aborted transaction."""
        if not header.attributes & TRANSACTIONAL_MASK or header.is_control:
            return False
        ranges = self.aborted.get(header.producer_id, ())
        return any(first <= header.base_offset < last for first, last in ranges)

    @property
    def end_offset(self) -> int:
        """Where the next pass's dirty part starts if the map holds every dirty key."""
        return self.segments[-1].next_offset


@dataclass(slots=True)
class CleaningStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    unreadable_batches: int = 0
    segments_rewritten: int = 0


@dataclass(slots=True)
class CleaningResult:
    job: CleaningJob
    end_offset: int  # where the next pass's dirty part starts: the first record not mapped
    copies: list[tuple[Segment, CleanedCopy]] = field(default_factory=list)
    stats: CleaningStats = field(default_factory=CleaningStats)
    # (producer id, offset) of the ABORT markers each copy removes, by its segment's base
    aborts: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    # producers with a transactional batch read since their last marker (in this pass)
    open_txns: set[int] = field(default_factory=set)


def plan_cleaning(
    log: SegmentedLog,
    now_ms: int,
    eso: int | None,
    first_dirty: int,
    map_entries: int = DEFAULT_MAP_ENTRIES,
) -> CleaningJob | None:
    """The next pass over `log`, or None when it is not compacted or not dirty enough.

    `first_dirty` is where the last pass stopped; `map_entries` bounds the pass's offset map."""
    config = log.config
    if not config.compact:
        return None
    segments: list[Segment] = []
    stable = log.last_stable_offset
    for segment in log.segments[:-1]:
        young = now_ms - segment.max_timestamp < config.min_compaction_lag_ms
        if young or segment.damage.ranges or segment.next_offset > stable:
            break
        segments.append(segment)
    dirty_from = next((i for i, s in enumerate(segments) if s.next_offset > first_dirty), None)
    if dirty_from is None:
        return None
    total = sum(s.size for s in segments)
    dirty = sum(s.size for s in segments[dirty_from:])
    if total == 0 or dirty / total < config.min_cleanable_dirty_ratio:
        return None
    aborted: dict[int, list[tuple[int, int]]] = {}
    for a in log.aborted_transactions(segments[0].base_offset, segments[-1].next_offset):
        aborted.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    return CleaningJob(
        log, tuple(segments), dirty_from, eso, now_ms, config, first_dirty, map_entries,
        {pid: tuple(ranges) for pid, ranges in aborted.items()},
    )  # fmt: skip


def _reader(segment: Segment) -> tuple[int | None, Iterator[tuple[BatchHeader, bytes]]]:
    fd = os.open(segment.log_path, os.O_RDONLY) if isinstance(segment, FileSegment) else None

    def read(position: int, size: int) -> bytes:
        return os.pread(fd, size, position) if fd is not None else segment.read(position, size)

    return fd, _batches(segment, read)


def _batches(segment: Segment, read: _Read) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every stored batch of a sealed segment, checked (header, length, offset, CRC), read in
    chunks. :raises SegmentDamaged: at the first batch that is not intact."""
    size, position, expected = segment.size, 0, segment.base_offset
    while position < size:
        chunk = read(position, min(READ_CHUNK_BYTES, size - position))
        consumed = 0
        try:
            for pos, header in iter_batch_headers(chunk):
                batch = chunk[pos : pos + header.size]
                yield _checked(segment, position + pos, expected, header, batch)
                consumed, expected = pos + header.size, header.last_offset + 1
            if consumed == 0:  # one batch larger than a chunk, or a header that does not fit
                header = parse_header(chunk)
                if header.size > size - position:
                    raise InvalidRecordBatch("length", f"batch of {header.size} bytes")
                yield _checked(segment, position, expected, header, read(position, header.size))
                consumed, expected = header.size, header.last_offset + 1
        except InvalidRecordBatch as e:
            raise SegmentDamaged(segment, position + consumed, e.reason) from e
        position += consumed


def _checked(
    segment: Segment, position: int, expected: int, header: BatchHeader, batch: bytes
) -> tuple[BatchHeader, bytes]:
    if header.base_offset != expected:
        raise SegmentDamaged(segment, position, "offset")
    if len(batch) != header.size or crc32c.crc32c(batch[ATTRIBUTES_POS:]) != header.crc:
        raise SegmentDamaged(segment, position, "crc")
    return header, batch


def _build_map(job: CleaningJob, offsets: OffsetMap) -> int:
    """Map the dirty records from ``job.first_dirty`` on until `offsets` is full; returns the
    first offset not mapped (the job's end when every dirty key fitted)."""
    for segment in job.segments[job.dirty_from :]:
        stopped = _map_segment(segment, job, offsets)
        if stopped is not None:
            return stopped
    return job.end_offset


def _map_segment(segment: Segment, job: CleaningJob, offsets: OffsetMap) -> int | None:
    """Map one segment's keyed records at or above `job.first_dirty` (aborted ones are not
    records of the log's history); the offset of the first one the full map refused, or None
    when all fitted."""
    first_dirty = job.first_dirty
    fd, batches = _reader(segment)
    try:
        for header, batch in batches:
            if header.is_control or header.record_count == 0 or header.last_offset < first_dirty:
                continue
            if job.is_aborted(header):
                continue
            try:
                _, records = decode_records(batch)
            except InvalidRecordBatch:
                continue  # counted when the segment is cleaned
            for r in records:
                offset = header.base_offset + r.offset_delta
                if r.key is None or offset < first_dirty:
                    continue
                if not offsets.put(r.key, offset):
                    return offset
    finally:
        if fd is not None:
            os.close(fd)
    return None


class _CopyWriter:
    """Appends kept batches and empty batches for removed runs to a cleaned copy."""

    def __init__(self, copy: CleanedCopy) -> None:
        self.segment = copy.segment
        self.gap: tuple[int, int, int] | None = None  # first, last offset, max timestamp
        self.removed = 0

    def remove(self, first: int, last: int, max_timestamp: int, records: int) -> None:
        self.removed += records
        if self.gap is not None and self.gap[1] + 1 == first:
            first, max_timestamp = self.gap[0], max(self.gap[2], max_timestamp)
        self.gap = (first, last, max_timestamp)

    def keep(self, batch: bytes) -> None:
        self._close_gap()
        self._append(batch)

    def close(self) -> None:
        self._close_gap()

    def _close_gap(self) -> None:
        if self.gap is None:
            return
        first, last, ts = self.gap
        self.gap = None
        fields = StoredBatch(
            base_offset=first, last_offset=last, attributes=0, base_timestamp=ts,
            max_timestamp=ts, producer_id=-1, producer_epoch=-1, base_sequence=-1,
            record_count=0,
        )  # fmt: skip
        self._append(build_stored_batch(fields, b""))

    def _append(self, batch: bytes) -> None:
        header = parse_header(batch)
        self.segment.append(batch, [(0, header)])


def _retained(
    r: Record, header: BatchHeader, offsets: OffsetMap, job: CleaningJob, end: int
) -> bool:
    offset = header.base_offset + r.offset_delta
    if r.key is None or offset >= end:  # beyond the map: a later pass decides
        return True
    latest = offsets.latest(r.key)
    if latest is not None and offset < latest:
        return False
    expired = job.now_ms - header.max_timestamp > job.config.delete_retention_ms
    return not (r.value_is_null and expired)


def _runs(keep: list[bool]) -> Iterator[tuple[bool, int, int]]:
    """(kept, first index, last index) of each run of equal flags."""
    start = 0
    for i in range(1, len(keep) + 1):
        if i == len(keep) or keep[i] != keep[start]:
            yield keep[start], start, i - 1
            start = i


def _run_batch(header: BatchHeader, run: list[Record]) -> bytes:
    first, last = run[0].offset_delta, run[-1].offset_delta
    if header.timestamp_type:  # LogAppendTime: the batch's time is every record's
        max_ts = header.max_timestamp
    else:
        max_ts = max(header.base_timestamp + r.timestamp_delta for r in run)
    sequence = header.base_sequence
    if sequence >= 0:
        sequence = (sequence + first) & _INT32_MAX
    fields = StoredBatch(
        base_offset=header.base_offset + first, last_offset=header.base_offset + last,
        attributes=header.attributes, base_timestamp=header.base_timestamp,
        max_timestamp=max_ts, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=sequence,
        record_count=len(run), partition_leader_epoch=header.partition_leader_epoch,
    )  # fmt: skip
    return build_stored_batch(fields, encode_run(run, first))


def _clean_batch(
    header: BatchHeader,
    batch: bytes,
    out: _CopyWriter,
    offsets: OffsetMap,
    job: CleaningJob,
    end: int,
) -> bool:
    """Write what survives of one data batch; False if it could not be read (kept whole)."""
    try:
        _, records = decode_records(batch)
    except InvalidRecordBatch:
        out.keep(batch)
        return False
    keep = [_retained(r, header, offsets, job, end) for r in records]
    if all(keep):
        out.keep(batch)
        return True
    for kept, i, j in _runs(keep):
        if kept:
            out.keep(_run_batch(header, records[i : j + 1]))
        else:
            first = header.base_offset + records[i].offset_delta
            last = header.base_offset + records[j].offset_delta
            out.remove(first, last, header.max_timestamp, j - i + 1)
    return True


def _marker_removable(
    header: BatchHeader, batch: bytes, job: CleaningJob, result: CleaningResult
) -> bool:
    """Whether a transaction marker goes (see the module's docstring); either way its
    producer's next transactional batch starts a new transaction."""
    read_batches = header.producer_id in result.open_txns
    result.open_txns.discard(header.producer_id)
    if read_batches or job.now_ms - header.max_timestamp <= job.config.delete_retention_ms:
        return False
    try:
        marker_type(batch)
    except InvalidRecordBatch:
        return False  # not a marker this cleaner can read: kept
    return True


def _removed_whole(out: _CopyWriter, header: BatchHeader) -> None:
    out.remove(header.base_offset, header.last_offset, header.max_timestamp, header.record_count)


def _clean_control(
    header: BatchHeader, batch: bytes, out: _CopyWriter, job: CleaningJob,
    result: CleaningResult, aborts: list[tuple[int, int]],
) -> None:  # fmt: skip
    """A transaction marker goes when `_marker_removable`; share state below the ESO goes."""
    if header.producer_id >= 0:
        if not _marker_removable(header, batch, job, result):
            out.keep(batch)
            return
        _removed_whole(out, header)
        if marker_type(batch) == ControlRecordType.ABORT:
            aborts.append((header.producer_id, header.base_offset))
    elif job.eso is not None and header.last_offset < job.eso:
        _removed_whole(out, header)
    else:
        out.keep(batch)  # share state still needed


def _clean_segment(
    segment: Segment,
    copy: CleanedCopy,
    offsets: OffsetMap,
    job: CleaningJob,
    result: CleaningResult,
) -> int:
    """Write the cleaned copy of `segment`; returns how many records it lost."""
    out = _CopyWriter(copy)
    aborts: list[tuple[int, int]] = []
    fd, batches = _reader(segment)
    try:
        for header, batch in batches:
            if header.record_count == 0:  # an earlier pass's empty batch
                out.remove(header.base_offset, header.last_offset, header.max_timestamp, 0)
            elif header.is_control:
                _clean_control(header, batch, out, job, result, aborts)
            else:
                if header.attributes & TRANSACTIONAL_MASK:  # its transaction's marker waits
                    result.open_txns.add(header.producer_id)
                if job.is_aborted(header):
                    _removed_whole(out, header)
                elif not _clean_batch(header, batch, out, offsets, job, result.end_offset):
                    result.stats.unreadable_batches += 1
        out.close()
        if aborts:
            result.aborts[segment.base_offset] = aborts
    finally:
        if fd is not None:
            os.close(fd)
    return out.removed


def run_cleaning(job: CleaningJob) -> CleaningResult:
    """Build the offset map and write committed copies of the segments that lose records.

    Runs in a thread: it reads only sealed segments (through descriptors of its own) and
    writes only ``.cleaned``/``.swap`` files. On any error every copy is discarded.

    :raises SegmentDamaged: a batch is damaged; nothing was committed.
    :raises OSError: a read or write failed; nothing was committed.
    """
    offsets = OffsetMap(job.map_entries)
    result = CleaningResult(job, _build_map(job, offsets))
    stats = result.stats
    try:
        # Segments wholly beyond what the map reached wait for the next pass.
        for segment in (s for s in job.segments if s.base_offset < result.end_offset):
            copy = job.log.cleaning_copy(segment)
            result.copies.append((segment, copy))
            stats.bytes_read += segment.size
            removed = _clean_segment(segment, copy, offsets, job, result)
            if removed == 0 and copy.segment.size == segment.size:
                copy.discard()
                result.copies.pop()
                continue
            copy.finish()
            stats.records_removed += removed
            stats.bytes_written += copy.segment.size
            stats.segments_rewritten += 1
    except BaseException:
        for _, copy in result.copies:
            copy.discard()
        raise
    return result


def swap_in(result: CleaningResult) -> list[CleanedCopy]:
    """Put the committed copies in place (event loop); returns the ones swapped in, whose
    `release` (in a thread: see `release_replaced`) lets go of the replaced files.

    A segment that left the log since the plan (retention) has its copy removed."""
    return [
        copy for old, copy in result.copies
        if swap_one(result.job.log, old, copy, result.aborts.get(old.base_offset, ()))
    ]  # fmt: skip


def swap_one(
    log: SegmentedLog, old: Segment, copy: CleanedCopy, aborts: Iterable[tuple[int, int]] = ()
) -> bool:
    """One segment's swap: three renames. Segments are swapped one by one, so a caller on the
    event loop may yield between them; reads in between see each segment whole, old or new.
    The ABORT markers the copy removes leave the aborted index first (`forget_aborted`)."""
    if not any(s is old for s in log.segments[:-1]):
        copy.discard()
        return False
    log.forget_aborted(aborts)
    new = copy.install()
    log.replace_segment(old, new)
    old.close()
    return True


def release_replaced(copies: list[CleanedCopy]) -> None:
    for copy in copies:
        copy.release()
