"""`Segment.locate` reads the header of a batch just appended alone (`TAIL_READ`): a
steady-rate ShareFetch or Fetch reads from the offset last appended, and the header walk's
set-up cost ~200 opcodes per request there (bench/PROFILE.md, issue 33). Whatever the log,
it must find what the walk finds, damage included."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from protocol.record_batch import build_batch
from storage import LogConfig
from storage import MemoryLog
from storage import SegmentLog
from storage import segment as segment_module
from storage.base_log import SegmentedLog
from storage.errors import CorruptRecords
from storage.errors import OffsetOutOfRange
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000

batches_st = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 300)), min_size=1, max_size=25)


def _located(log: SegmentedLog, offset: int) -> Any:
    """What `_locate` answers for `offset` (its segment by base offset), or the error."""
    try:
        found = log._locate(offset)
    except (CorruptRecords, OffsetOutOfRange) as e:
        return type(e).__name__, str(e)
    if found is None:
        return None
    segment, position, header = found
    return segment.base_offset, position, header


def _both_ways(log: SegmentedLog, offset: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    with monkeypatch.context() as m:
        m.setattr(segment_module, "TAIL_READ", False)
        walked = (_located(log, offset), log.read_with_spans(offset, 1 << 20))
    return (_located(log, offset), log.read_with_spans(offset, 1 << 20)), walked


def _fill(log: SegmentedLog, batches: list[tuple[int, int]]) -> None:
    for n, size in batches:
        log.append(build_batch([(b"k", b"x" * size)] * n, timestamp_ms=TS), now_ms=TS)


@settings(max_examples=examples(25), deadline=None)
@given(batches_st, st.integers(200, 3000), st.integers(0, 800))
def test_every_offset_is_located_as_the_walk_locates_it(
    batches: list[tuple[int, int]], segment_bytes: int, interval: int
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as mp:
        for log in (SegmentLog.open(directory, config), MemoryLog(config)):
            _fill(log, batches)
            for offset in range(log.log_end_offset + 1):
                fast, walked = _both_ways(log, offset, mp)
                assert fast == walked


def test_the_batch_just_appended_is_located_without_a_header_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentLog.open(tmp_path, LogConfig(index_interval_bytes=4096))
    _fill(log, [(1, 100)] * 10)
    last = log.log_end_offset - 1

    def no_walk(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("walked")

    monkeypatch.setattr(segment_module.Segment, "iter_headers", no_walk)
    _, _, header = log._locate(last)  # type: ignore[misc]
    assert (header.base_offset, header.last_offset) == (last, last)
    _, spans = log.read_with_spans(last, 1 << 20)
    assert [(s.base_offset, s.last_offset) for s in spans] == [(last, last)]


BASE_OFFSET_99 = (99).to_bytes(8, "big")


@pytest.mark.parametrize(("field", "value"), [(0, BASE_OFFSET_99), (16, b"\x07")])
def test_a_tail_batch_damaged_on_disk_is_found_as_the_walk_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: int, value: bytes
) -> None:
    """Its base offset rewritten (outside the CRC) or its magic broken after the append: the
    header read alone does not match, and the walk looks again and records the damage."""
    answers = []
    for tail_read in (True, False):
        directory = tmp_path / str(tail_read)
        log = SegmentLog.open(directory, LogConfig(index_interval_bytes=4096))
        _fill(log, [(1, 100)] * 5)
        last = log.log_end_offset - 1
        segment, position, _ = log._locate(last)  # type: ignore[misc]
        (file,) = directory.glob("*.log")
        with file.open("r+b") as f:
            f.seek(position + field)
            f.write(value)
        monkeypatch.setattr(segment_module, "TAIL_READ", tail_read)
        located = repr(_located(log, last)).replace(str(directory), "")
        answers.append((located, segment.damage.ranges, log.read(last, 1 << 20)))
    assert answers[0] == answers[1]
    assert answers[0][1], "the damage is recorded"
