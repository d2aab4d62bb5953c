"""Open-time checks of a segment: trust its saved indexes, or scan, validate, truncate.

The discipline is ZODB FileStorage's: load the saved index and check it against the
data; where that fails (or after an unclean shutdown, for the active segment) scan
forward checking every batch's length, offset continuity and CRC32C, and at the first
torn or corrupt batch save the cut bytes aside and truncate to the last whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass

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

SCAN_CHUNK_BYTES = 8 * 1024 * 1024


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


def _scan(segment: FileSegment, sealed_end: int | None) -> tuple[int, str | None]:
    """Re-learn the segment from its bytes; returns (valid end, stop reason or None).

    The active segment (``sealed_end`` None) stops at the first bad batch: after a crash
    that is a torn write. A sealed segment was whole when it was sealed, so a bad batch
    there is damage: it is recorded and stepped over, and the scan goes on after it.
    """
    segment.reset_tracking()
    position, want = 0, 0
    while position < segment.size:
        remaining = segment.size - position
        buf = segment.read(position, min(remaining, max(SCAN_CHUNK_BYTES, want)))
        result = scan_batches(buf, expected_offset=segment.next_offset)
        for pos, header in result.batches:
            segment.track(position + pos, header.base_offset, header)
        segment.damage.mark_verified(position, position + result.end)
        position += result.end
        want = 0
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
    segment: FileSegment, events: list[RecoveryEvent], sealed_end: int | None = None
) -> bool:
    """Scan, validate; truncate a torn tail of the active segment (``sealed_end`` None) or
    step over damage in a sealed one; rebuild and save the indexes. True if bytes were cut."""
    end, reason = _scan(segment, sealed_end)
    cut = reason is not None
    if cut:
        saved = segment.save_aside(end)
        events.append(
            RecoveryEvent("truncated", str(segment.log_path), end, f"{reason}; saved {saved.name}")
        )
        segment.truncate(end)
        segment.flush()
    events.append(RecoveryEvent("index_rebuilt", str(segment.log_path)))
    segment.save_indexes()
    return cut
