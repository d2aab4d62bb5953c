"""How much one log read returns (issue 29): whole batches within `max_bytes`, the first one
whole above it only up to `first_batch_max` (KIP-74's one batch), and a read that finds only
empty batches (a segment compaction emptied, damage's stand-in) goes on past them, as Kafka's
`LocalLog.read` goes on past a segment with nothing in it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage.base_log import SegmentedLog
from storage.cleaner import plan_cleaning
from storage.cleaner import run_cleaning
from storage.cleaner import swap_in
from storage.config import LogConfig
from storage.memory_log import MemoryLog

DAY = 24 * 3600 * 1000
COMPACT = LogConfig(
    segment_bytes=400,
    index_interval_bytes=64,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=DAY,
)


def sizes(data: bytes) -> list[int]:
    return [h.size for _, h in iter_batch_headers(data)]


def log_of(batch_values: Sequence[int]) -> MemoryLog:
    """One batch of one record per entry, its value that many bytes."""
    log = MemoryLog(LogConfig(index_interval_bytes=64))
    for n in batch_values:
        log.append(build_batch([(None, b"x" * n)], timestamp_ms=1), now_ms=1)
    return log


def test_whole_batches_within_max_bytes_and_the_first_one_whole_above_it() -> None:
    log = log_of([1000, 100, 100, 100])
    first, small = sizes(log.read(0, 1 << 20))[:2]
    assert sizes(log.read(0, 10)) == [first]  # KIP-74: one batch, whatever its size
    assert log.read(0, 10, first_batch_max=first - 1) == b""
    assert sizes(log.read(0, first + small, first_batch_max=first + small)) == [first, small]
    assert sizes(log.read(1, 2 * small + small // 2, first_batch_max=1 << 20)) == [small, small]
    for budget in range(0, first + 3 * small + 2, 37):
        for offset in range(4):
            got = log.read(offset, budget, first_batch_max=budget)
            assert len(got) <= budget
            whole = log.read(offset, budget)
            assert len(whole) <= max(budget, sizes(whole)[0])


def put_versions(log: SegmentedLog, key: bytes, versions: int) -> None:
    for v in range(versions):
        log.append(build_batch([(key, b"%d" % v * 20)], timestamp_ms=1000), now_ms=1000)


def clean(log: SegmentedLog) -> None:
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None
    swap_in(run_cleaning(job))


def emptied_log() -> tuple[MemoryLog, int]:
    """Many segments of one key's old values, then its latest and another key: cleaning
    leaves each old segment one empty batch. Returns the log and the latest value's offset."""
    log = MemoryLog(COMPACT)
    put_versions(log, b"k", 120)
    latest = log.log_end_offset - 1
    put_versions(log, b"other", 1)
    log.roll()
    clean(log)
    return log, latest


def test_a_read_goes_on_past_segments_compaction_emptied() -> None:
    log, latest = emptied_log()
    emptied = [s for s in log.segments if s.size == BATCH_HEADER_SIZE]
    assert len(emptied) > 10  # each holds one empty batch over its removed offsets
    data = log.read(0, 1 << 20)
    headers = [h for _, h in iter_batch_headers(data)]
    with_records = [h for h in headers if h.record_count]
    assert with_records and with_records[0].base_offset <= latest <= with_records[0].last_offset
    # Contiguous: every offset up to the data is covered by the empty batches before it.
    assert [h.base_offset for h in headers[1:]] == [h.last_offset + 1 for h in headers[:-1]]
    # Within the budget, the empty batches count: a small one stops among them.
    small = log.read(0, 5 * BATCH_HEADER_SIZE)
    assert len(small) == 5 * BATCH_HEADER_SIZE
    assert not any(h.record_count for _, h in iter_batch_headers(small))


@pytest.mark.parametrize("min_one", [True, False])
def test_a_batch_that_does_not_fit_beside_the_empty_ones_comes_next(min_one: bool) -> None:
    log, latest = emptied_log()
    empties = log.read(0, 1 << 20)
    data_at = next(p for p, h in iter_batch_headers(empties) if h.record_count)
    room = data_at + 1  # the empty batches fit, the first batch of records does not
    first_batch_max = None if min_one else room
    got = log.read(0, room, first_batch_max)
    assert len(got) == data_at and not any(h.record_count for _, h in iter_batch_headers(got))
    after = next(h for _, h in iter_batch_headers(got[-BATCH_HEADER_SIZE:])).last_offset + 1
    assert next(iter_batch_headers(log.read(after, room, first_batch_max)))[1].record_count
    assert after <= latest
    # The first batch's own limit, when above the read's, lets it in beside them.
    wider = log.read(0, room, 2 * room)
    assert room < len(wider) <= 2 * room
