"""Open-time check of a log's segments against each other: offsets missing, offsets twice.

Each segment's offsets run from its base (its file name) to its next offset (learnt at open
from the saved index and a tail walk, or from a scan), so the check reads nothing more. Segment
``i`` should end where segment ``i + 1`` starts:

- It ends before: the offsets between are in no file (a segment file deleted, or cut at a
  batch boundary). Reads already step over them (a consumer moves to the next segment's first
  batch, a share group archives them); here they are logged once and counted
  (`SegmentedLog.missing_records`).
- It ends after: the next segment's first batches claim offsets segment ``i`` already holds.
  As within a segment, where a batch whose base offset is not the previous batch's end is
  damage, the later claimant is the damaged one: the next segment's batches below the end
  are recorded as damage (`storage.damage`: logged once, never served; the offsets only a
  batch straddling the end held are counted as lost), and reads of the offsets in both take
  them from segment ``i`` (`SegmentedLog` locates by each segment's first offset after the
  ones before). Serving both would give readers two records at one offset, depending on
  where they started. Kafka trusts sealed segments here (`LogLoader` opens each at the base
  offset its file name gives and checks no further); a reader from the start would get the
  earlier segment's records, one that seeks the later segment's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from storage.damage import DamagedRange
from storage.damage import record_damage
from storage.segment import Segment

_log = structlog.get_logger("shoal.storage")


@dataclass(frozen=True, slots=True)
class MissingOffsets:
    """Offsets [first_offset, last_offset] that no segment holds, before `file`."""

    first_offset: int
    last_offset: int
    file: str

    @property
    def records(self) -> int:
        return self.last_offset - self.first_offset + 1


def check_ranges(segments: Sequence[Segment]) -> list[MissingOffsets]:
    """Log every gap between consecutive segments once and return them; step over overlaps."""
    missing: list[MissingOffsets] = []
    if not segments:
        return missing
    end, before = segments[0].next_offset, segments[0]
    for segment in segments[1:]:
        base = segment.base_offset
        if end < base:
            gap = MissingOffsets(end, base - 1, segment.describe())
            missing.append(gap)
            _log.error(
                "offsets missing between segments", file=gap.file, after=before.describe(),
                offsets=[gap.first_offset, gap.last_offset], records=gap.records,
            )  # fmt: skip
        elif end > base:
            _step_over_overlap(segment, end, before)
        end, before = max(end, segment.next_offset), segment
    return missing


def first_offsets(segments: Sequence[Segment]) -> list[int]:
    """The offset each segment is read from: its base, or the end of the ones before it
    where they overlap it (`check_ranges` has made its batches below that damage)."""
    firsts, end = [], -1
    for segment in segments:
        firsts.append(max(segment.base_offset, end))
        end = max(end, segment.next_offset)
    return firsts


def _step_over_overlap(segment: Segment, end: int, before: Segment) -> None:
    """`segment`'s batches below `end` (offsets the segment before holds) are damage."""
    position, next_base = segment.size, segment.next_offset
    for pos, header in segment.iter_headers(segment.offset_index.lookup(end - segment.base_offset)):
        if header.base_offset >= end:
            position, next_base = pos, header.base_offset
            break
    damaged = DamagedRange(0, position, end, next_base - 1)
    segment.damage.drop_before(position)  # any stretch found inside this one
    overlap = [segment.base_offset, end - 1]
    record_damage(segment, damaged, "overlap", overlaps=overlap, previous=before.describe())
