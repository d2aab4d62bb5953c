"""Open-time checks of a segment: trust its saved indexes, or scan, validate, truncate.

The discipline is ZODB FileStorage's: load the saved index and check it against the
data; where that fails (or after an unclean shutdown, for the active segment) scan
forward checking every batch's length, offset continuity and CRC32C, and at the first
torn or corrupt batch save the cut bytes aside and truncate to the last whole batch.

After an unclean shutdown only what lies past the log's recovery point is scanned, as Kafka's
`LogLoader.recoverLog` recovers only the segments from its `recovery-point-offset-checkpoint`
on: below it everything was synced, and its batches were checked when they were appended, so
their headers are walked to rebuild the in-memory index and nothing more.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar

from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import LENGTH_POS
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import scan_batches
from storage.damage import find_damage
from storage.index import IndexCorrupt
from storage.index import OffsetIndex
from storage.index import TimeIndex
from storage.segment import FileSegment

# Read and checked at a time; a recovery yields between chunks (`recover_segment_slices`):
# ~10-20 ms of header parsing and CRCs for small batches.
SCAN_CHUNK_BYTES = 256 * 1024
# Headers walked (below the recovery point, or after the producer snapshot) between two yields.
WALK_SLICE_BATCHES = 2048

T = TypeVar("T")


def run_through(steps: Generator[None, None, T]) -> T:
    """Run a sliced job to its end in one go; its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


@dataclass(slots=True)
class RecoveryStats:
    """What opening logs cost, summed over them for the one line said when they are loaded."""

    segments_scanned: int = 0  # segments recovery read and checked (lengths, offsets, CRCs)
    bytes_scanned: int = 0
    indexes_rebuilt: int = 0  # segments whose saved indexes could not be used
    truncated: int = 0  # segments whose torn tail was cut

    def add(self, other: RecoveryStats) -> None:
        self.segments_scanned += other.segments_scanned
        self.bytes_scanned += other.bytes_scanned
        self.indexes_rebuilt += other.indexes_rebuilt
        self.truncated += other.truncated


@dataclass(frozen=True, slots=True)
class RecoveryEvent:
    kind: str  # "truncated", "index_rebuilt", "segment_deleted", "snapshot_discarded",
    # "log_start_discarded", "log_start_lowered"
    path: str
    position: int | None = None
    detail: str = ""


def load_indexes(segment: FileSegment) -> bool:
    """Adopt the saved indexes if they agree with the data; False if they cannot be trusted.

    The check walks batch headers from the last indexed batch to the end of the file,
    which also yields the segment's next offset and latest timestamps.
    """
    try:
        offset_index = OffsetIndex.from_bytes(segment.index_path.read_bytes(), segment.size)
        time_index = TimeIndex.from_bytes(segment.time_index_path.read_bytes())
    except (OSError, IndexCorrupt):
        return False
    segment.reset_tracking()
    start, expected = 0, segment.base_offset
    if offset_index:
        start, expected = offset_index.positions[-1], segment.base_offset + offset_index.offsets[-1]
    end = start
    try:
        for position, header in segment.iter_headers(start, strict=True):
            if position != end or header.base_offset != expected:
                return False
            segment.track(position, header.base_offset, header)
            end, expected = position + header.size, header.last_offset + 1
    except InvalidRecordBatch:
        return False
    if end != segment.size:
        return False
    # The walk re-derived the tail; the saved entries cover everything before it.
    segment.offset_index, segment.time_index = offset_index, time_index
    if time_index.last_timestamp > segment.max_timestamp:
        segment.max_timestamp = time_index.last_timestamp
        segment.max_timestamp_offset = time_index.offsets[-1]
    segment.next_offset = expected
    # The tail walk saw only part of the segment's data batches: the rest is saved beside it,
    # or learnt when first asked (Segment.data_max).
    segment.data_max_known = segment.non_data_known = start == 0
    if not segment.data_max_known:
        segment.load_data_max()
        segment.load_non_data()
    return True


def _walk_synced(segment: FileSegment, recovery_point: int) -> Generator[None, None, int]:
    """Track the batches below `recovery_point` from their headers alone; the position of the
    first batch at or after it (0, with nothing tracked, if the headers do not follow on)."""
    segment.reset_tracking()
    end = 0
    try:
        for n, (position, header) in enumerate(segment.iter_headers(0, strict=True), 1):
            if position != end or header.last_offset >= recovery_point:
                break  # (a batch across the recovery point: not one it names, so scanned)
            segment.track(position, header.base_offset, header)
            end = position + header.size
            if header.last_offset + 1 >= recovery_point:
                break  # what follows is not known synced: not even its header is asked for
            if n % WALK_SLICE_BATCHES == 0:
                yield
    except InvalidRecordBatch:
        pass  # damage below the recovery point: the scan from the start steps over it
    else:
        return end
    segment.reset_tracking()
    return 0


def _scan(
    segment: FileSegment, sealed_end: int | None, start: int = 0
) -> Generator[None, None, tuple[int, str | None]]:
    """Re-learn the segment from its bytes from `start` (what lies before it is tracked
    already); returns (valid end, stop reason or None).

    The active segment (``sealed_end`` None) stops at the first bad batch: after a crash
    that is a torn write. A sealed segment was whole when it was sealed, so a bad batch
    there is damage: it is recorded and stepped over, and the scan goes on after it.
    """
    if start == 0:
        segment.reset_tracking()
    position, want = start, 0
    while position < segment.size:
        remaining = segment.size - position
        buf = segment.read(position, min(remaining, max(SCAN_CHUNK_BYTES, want)))
        result = scan_batches(buf, expected_offset=segment.next_offset)
        for pos, header in result.batches:
            segment.track(position + pos, header.base_offset, header)
        segment.damage.mark_verified(position, position + result.end)
        position += result.end
        want = 0
        yield  # a chunk checked: others may run
        if result.stop_reason is None:
            continue
        straddles = result.stop_reason == "truncated" and len(buf) < remaining
        if sealed_end is not None and not straddles:
            hole = find_damage(
                segment, position, segment.next_offset, sealed_end, result.stop_reason
            )
            position, segment.next_offset = hole.end, hole.last_offset + 1
            continue
        if not straddles:
            return position, result.stop_reason
        # A batch straddles the chunk edge: read it whole next time if the file holds it.
        tail = buf[result.end :]
        want = BATCH_HEADER_SIZE
        if len(tail) >= LOG_OVERHEAD:
            want = int.from_bytes(tail[LENGTH_POS:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
        if want > segment.size - position:
            if sealed_end is None:
                return position, "truncated"
            want = 0  # a length past the end of a sealed segment: damage, found next round
            hole = find_damage(segment, position, segment.next_offset, sealed_end, "length")
            position, segment.next_offset = hole.end, hole.last_offset + 1
    return position, None


def recover_segment(
    segment: FileSegment,
    events: list[RecoveryEvent],
    sealed_end: int | None = None,
    *,
    recovery_point: int | None = None,
    stats: RecoveryStats | None = None,
) -> bool:
    """Scan, validate; truncate a torn tail of the active segment (``sealed_end`` None) or
    step over damage in a sealed one; rebuild the indexes. True if bytes were cut.

    The active segment's batches below ``recovery_point`` are not scanned (their headers are
    walked). Its rebuilt indexes are saved only when its tail was cut (else when it is sealed
    or closed, as after any append); a sealed segment's are saved at once.
    """
    return run_through(
        recover_segment_slices(
            segment, events, sealed_end, recovery_point=recovery_point, stats=stats
        )
    )


def recover_segment_slices(
    segment: FileSegment,
    events: list[RecoveryEvent],
    sealed_end: int | None = None,
    *,
    recovery_point: int | None = None,
    stats: RecoveryStats | None = None,
) -> Generator[None, None, bool]:
    """`recover_segment`, yielding between chunks of its walk and its scan (a caller on the
    event loop lets others run: a 1 GiB segment takes seconds)."""
    stats = stats if stats is not None else RecoveryStats()
    start = 0
    if sealed_end is None and recovery_point is not None and recovery_point > segment.base_offset:
        start = yield from _walk_synced(segment, recovery_point)
    size = segment.size
    end, reason = yield from _scan(segment, sealed_end, start)
    if start < size:
        stats.segments_scanned += 1
        stats.bytes_scanned += size - start
    cut = reason is not None
    if cut:
        stats.truncated += 1
        saved = segment.save_aside(end)
        events.append(
            RecoveryEvent("truncated", str(segment.log_path), end, f"{reason}; saved {saved.name}")
        )
        segment.truncate(end)
        segment.flush()
    elif sealed_end is None:
        return False  # whole: its indexes are in memory, and on disk at the next seal or close
    stats.indexes_rebuilt += 1
    events.append(RecoveryEvent("index_rebuilt", str(segment.log_path)))
    segment.save_indexes()
    return cut
