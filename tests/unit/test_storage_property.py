"""Hypothesis: any append history survives reopening and every offset reads back."""

from __future__ import annotations

import tempfile

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.record_batch import validate_batches
from storage import LogConfig
from storage import MemoryLog
from storage import SegmentLog
from storage.base_log import SegmentedLog
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000

batches_st = st.lists(
    st.tuples(st.integers(1, 5), st.integers(0, 200), st.integers(0, 10_000)),
    min_size=1,
    max_size=30,
)


def check_every_offset(log: SegmentedLog, expected: list[tuple[int, int, int]]) -> None:
    for base, last, _ in expected:
        for offset in range(base, last + 1):
            data = log.read(offset, 1)
            (header,) = validate_batches(data)  # one whole batch, CRC intact
            assert (header.base_offset, header.last_offset) == (base, last)
    for offset in range(log.log_end_offset + 1):
        data, spans = log.read_with_spans(offset, 1000)
        assert [p for p, _ in iter_batch_headers(data)] == [s.position_in_result for s in spans]


@settings(max_examples=examples(20), deadline=None)
@given(
    batches_st,
    st.integers(100, 2000),
    st.integers(0, 500),
    st.booleans(),
)
def test_random_appends_survive_reopen(
    batches: list[tuple[int, int, int]], segment_bytes: int, interval: int, clean: bool
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    expected: list[tuple[int, int, int]] = []
    with tempfile.TemporaryDirectory() as directory:
        log = SegmentLog.open(directory, config)
        memory = MemoryLog(config)
        for n, size, ts in batches:
            data = build_batch([(b"k", b"x" * size)] * n, timestamp_ms=TS + ts)
            result = log.append(data, now_ms=TS)
            assert memory.append(data, now_ms=TS) == result
            expected.append((result.base_offset, result.last_offset, ts))
        if clean:
            log.close()
        else:
            log.flush()
        log = SegmentLog.open(directory, config)
        assert log.log_end_offset == memory.log_end_offset == expected[-1][1] + 1
        assert [s.base_offset for s in log.segments] == [s.base_offset for s in memory.segments]
        check_every_offset(log, expected)
        check_every_offset(memory, expected)
        for target in {ts for _, _, ts in expected}:
            want = next((b, TS + t) for b, _, t in expected if t >= target)
            assert log.offset_for_timestamp(TS + target) == want
            assert memory.offset_for_timestamp(TS + target) == want
        log.close()
