"""The offsets a log holds no data record at (control and empty batches), as lag counts them:
by range, across segments, kept across a clean restart and a crash, and learnt again by a
header walk when the saved ranges are missing or stale."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from protocol.record_batch import ControlRecordType
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key
from storage import LogConfig
from storage import MemoryLog
from storage import SegmentLog
from storage.base_log import SegmentedLog
from storage.non_data import NonDataRanges
from storage.segment import NON_DATA_SUFFIX
from storage.segment_log import CLEAN_SHUTDOWN

TS = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=300, index_interval_bytes=100)


def data(n: int) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 10) for i in range(n)], timestamp_ms=TS)


def marker() -> bytes:
    """A transaction's commit marker: a control batch of one record."""
    return build_control_batch(0, 7, 0, TS, [(control_record_key(ControlRecordType.COMMIT), b"")])


def share_state() -> bytes:
    """A share-state record (SHARE_DELTA's control type): a control batch of one record."""
    return build_control_batch(0, -1, -1, TS, [(control_record_key(6), b"state")])


def fill(log: SegmentedLog, plan: list[int]) -> list[bool]:
    """Append data batches of n records (n > 0) and control batches (0); one flag per offset:
    does it hold data?"""
    held: list[bool] = []
    for n in plan:
        if n:
            log.append(data(n), now_ms=TS)
            held += [True] * n
        else:
            log.append_control(share_state() if len(held) % 2 else marker(), now_ms=TS)
            held.append(False)
    return held


def test_ranges_merge_count_and_find_data() -> None:
    r = NonDataRanges()
    for first, last in [(3, 3), (4, 5), (9, 9), (12, 14)]:
        r.add(first, last)
    assert len(r) == 3  # 3..5 merged
    assert r.total == 7
    assert [r.below(x) for x in (0, 3, 4, 6, 9, 10, 13, 20)] == [0, 0, 1, 3, 3, 4, 5, 7]
    assert r.count(4, 13) == 2 + 1 + 1
    assert r.count(7, 7) == r.count(9, 2) == 0
    assert [r.data_from(x) for x in (0, 3, 5, 6, 9, 12, 15)] == [0, 6, 6, 6, 10, 15, 15]
    assert list(r.ranges(4, 13)) == [(4, 5), (9, 9), (12, 12)]


def test_saved_ranges_are_taken_only_for_the_segment_they_describe() -> None:
    r = NonDataRanges()
    r.add(10, 12)
    r.add(20, 20)
    saved = r.to_bytes(4096)
    back = NonDataRanges.from_bytes(saved, 4096)
    assert back is not None and list(back.ranges(0, 100)) == [(10, 12), (20, 20)]
    assert NonDataRanges.from_bytes(saved, 4097) is None  # the segment changed since
    torn = saved[:-1] + bytes([saved[-1] ^ 1])
    assert NonDataRanges.from_bytes(torn, 4096) is None
    assert NonDataRanges.from_bytes(saved[:10], 4096) is None


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_data_records_and_first_data_offset_across_segments(tmp_path: Path, kind: str) -> None:
    log: SegmentedLog = MemoryLog(SMALL) if kind == "memory" else SegmentLog.open(tmp_path, SMALL)
    held = fill(log, [3, 0, 0, 2, 0, 4, 0, 0, 0, 1, 5, 0])
    assert len(log.segments) > 2
    end = log.log_end_offset
    for start in range(end + 1):
        for stop in range(start, end + 1):
            assert log.data_records(start, stop) == sum(held[start:stop]), (start, stop)
    for offset in range(end + 1):
        want = next((o for o in range(offset, end) if held[o]), end)
        assert log.first_data_offset(offset) == want
    assert log.non_data_ranges(0, end) == [(3, 4), (7, 7), (12, 14), (21, 21)]


def test_a_restart_keeps_the_ranges_and_a_lost_file_is_walked_again(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path, SMALL)
    held = fill(log, [2, 0, 3, 0, 0, 1, 0, 4, 0, 2, 0])
    end = log.log_end_offset
    log.close()

    reopened = SegmentLog.open(tmp_path, SMALL)
    assert all(s.non_data_known for s in reopened.segments)  # read back, not walked
    assert reopened.data_records(0, end) == sum(held)
    reopened.close()

    for path in tmp_path.glob(f"*{NON_DATA_SUFFIX}"):
        path.unlink()
    walked = SegmentLog.open(tmp_path, SMALL)
    assert not all(s.non_data_known for s in walked.segments)
    for _ in walked.learn_non_data():
        pass
    assert all(s.non_data_known for s in walked.segments)
    assert walked.data_records(0, end) == sum(held)
    assert len(list(tmp_path.glob(f"*{NON_DATA_SUFFIX}"))) == len(walked.segments) - 1  # saved
    walked.close()


def test_after_a_crash_the_active_segment_is_scanned_and_sealed_ones_read_back(
    tmp_path: Path,
) -> None:
    log = SegmentLog.open(tmp_path, SMALL)
    held = fill(log, [1, 0, 2, 0, 0, 3, 0, 1, 0])
    end = log.log_end_offset
    log.flush()  # no close: no clean-shutdown marker, as after kill -9
    assert not (tmp_path / CLEAN_SHUTDOWN).exists()
    crashed = SegmentLog.open(tmp_path, SMALL)
    assert all(s.non_data_known for s in crashed.segments)
    assert crashed.data_records(0, end) == sum(held)


@settings(max_examples=40, deadline=None)
@given(
    plan=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=40),
    cut=st.data(),
)
def test_data_records_match_a_per_offset_model(plan: list[int], cut: st.DataObject) -> None:
    log = MemoryLog(SMALL)
    held = fill(log, plan)
    end = log.log_end_offset
    start = cut.draw(st.integers(min_value=0, max_value=end))
    stop = cut.draw(st.integers(min_value=start, max_value=end))
    assert log.data_records(start, stop) == sum(held[start:stop])
    assert log.non_data_offsets(start, stop) == (stop - start) - sum(held[start:stop])
