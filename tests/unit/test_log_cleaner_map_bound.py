"""The cleaner's key map is bounded (log.cleaner.dedupe.buffer.size): a dirty part with more
keys than the map holds is cleaned in several passes, each going on from where the last one
stopped, and ends exactly as one unbounded pass would."""

from __future__ import annotations

import dataclasses

from broker.log_cleaning import LogCleaner
from broker.metrics import BrokerMetrics
from protocol.record_batch import build_batch
from storage.base_log import SegmentedLog
from storage.cleaner import plan_cleaning
from storage.cleaner import run_cleaning
from storage.cleaner import swap_in
from storage.log_manager import LogManager
from storage.memory_log import MemoryLog
from storage.offset_map import BYTES_PER_ENTRY
from storage.offset_map import OffsetMap
from storage.offset_map import entries_for
from tests.unit.test_log_cleaner import COMPACT
from tests.unit.test_log_cleaner import DAY
from tests.unit.test_log_cleaner import records

KEYS, VERSIONS = 12, 3


def _fill(log: SegmentedLog) -> None:
    """KEYS keys, VERSIONS times each, three keys to a batch; then key 5's tombstone."""
    for v in range(VERSIONS):
        for first in range(0, KEYS, 3):
            pairs = [(b"k%02d" % k, b"v%d" % v) for k in range(first, first + 3)]
            log.append(build_batch(pairs, timestamp_ms=1000), now_ms=1000)
    log.append(build_batch([(b"k05", None)], timestamp_ms=1000), now_ms=1000)
    log.roll()


def _passes(log: SegmentedLog, entries: int, now_ms: int = 2000) -> list[int]:
    """Clean until there is nothing left to do; the end offset of each pass."""
    ends: list[int] = []
    first_dirty = 0
    while (job := plan_cleaning(log, now_ms, None, first_dirty, entries)) is not None:
        result = run_cleaning(job)
        swap_in(result)
        ends.append(result.end_offset)
        first_dirty = result.end_offset
        assert len(ends) < 50, ends  # every pass goes forward
    return ends


def test_offset_map_refuses_new_keys_when_full_but_updates_known_ones() -> None:
    offsets = OffsetMap(max_entries=2)
    assert offsets.put(b"a", 1) and offsets.put(b"b", 2)
    assert not offsets.put(b"c", 3)
    assert offsets.put(b"a", 4)
    assert (len(offsets), offsets.latest(b"a"), offsets.latest(b"c")) == (2, 4, None)
    assert entries_for(10 * BYTES_PER_ENTRY) == 10 and entries_for(1) == 1


def test_more_keys_than_the_map_holds_clean_in_several_passes_and_end_right() -> None:
    bounded, unbounded = MemoryLog(COMPACT), MemoryLog(COMPACT)
    _fill(bounded)
    _fill(unbounded)
    ends = _passes(bounded, entries=5)
    assert len(ends) >= 3, ends  # 12 keys, 5 to a pass
    assert ends == sorted(ends) and ends[-1] == bounded.log_end_offset
    assert _passes(unbounded, entries=1000) == [unbounded.log_end_offset]
    expected = [(o, k, b"v2" if k != b"k05" else None) for o, k, _ in records(unbounded)]
    assert records(bounded) == records(unbounded) == expected
    assert len(expected) == KEYS


def test_a_tombstone_beyond_the_map_does_not_resurrect_older_values() -> None:
    """Once delete.retention.ms has passed, a tombstone is removed only by a pass whose map
    reached it: removed earlier, it would leave the older value it deletes."""
    log = MemoryLog(dataclasses.replace(COMPACT, segment_bytes=10_000))  # one segment
    for key in (b"a", b"b", b"c", b"k"):
        log.append(build_batch([(key, b"1")], timestamp_ms=1000), now_ms=1000)
    last = [(b"a", b"2"), (b"b", b"2"), (b"c", b"2"), (b"k", None)]
    log.append(build_batch(last, timestamp_ms=1000), now_ms=1000)
    log.roll()
    # The first pass maps a and b only, and cleans the segment that holds k's tombstone.
    ends = _passes(log, entries=2, now_ms=1000 + DAY + 1)
    assert ends[0] == 2 and len(ends) > 1
    assert records(log) == [(4, b"a", b"2"), (5, b"b", b"2"), (6, b"c", b"2")]


async def test_broker_cleaner_goes_on_from_where_a_full_map_stopped() -> None:
    logs = LogManager(None, dataclasses.replace(COMPACT), memory=True)
    logs.create_topic("t", 1)
    log = logs.log("t", 0)
    assert isinstance(log, SegmentedLog)
    _fill(log)
    cleaner = LogCleaner(logs, BrokerMetrics(), lambda: 2000, lambda: 4 * BYTES_PER_ENTRY)
    try:
        passes = 0
        while await cleaner.run({}):
            passes += 1
            assert passes < 50
    finally:
        cleaner.shutdown()
    assert passes >= 3
    assert sorted(k for _, k, _ in records(log)) == [b"k%02d" % k for k in range(KEYS)]
    assert all(v == (None if k == b"k05" else b"v2") for _, k, v in records(log))
