"""The cleaner on segment files: a crash (kill -9) at any point of a pass loses nothing.

Each test stops a pass at one point with an injected failure, leaves the files as a killed
process would (no clean-up, no close), and reopens the directory: the log holds either the
old segment or its cleaned copy, every surviving record at its offset, no duplicate and no
missing offset, and it cleans again afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage import cleaned_segment
from storage.cleaned_segment import FileCopy
from storage.cleaner import CleaningJob
from storage.cleaner import CleaningResult
from storage.cleaner import plan_cleaning
from storage.cleaner import release_replaced
from storage.cleaner import run_cleaning
from storage.cleaner import swap_in
from storage.config import LogConfig
from storage.file_handles import HANDLES
from storage.segment_log import SegmentLog
from tests.unit.test_log_cleaner import records

CONFIG = LogConfig(
    segment_bytes=600, index_interval_bytes=64, cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.0,
)  # fmt: skip
ALL = [(o, b"k%d" % (o % 4), b"v%d" % o) for o in range(24)]


def _swap(result: CleaningResult) -> int:
    """Swap in, then let go of the replaced files as the cleaner's thread does."""
    swapped = swap_in(result)
    release_replaced(swapped)
    return len(swapped)


class Crash(BaseException):
    """A kill -9: nothing after it runs, not even clean-up."""


def _filled(path: Path) -> SegmentLog:
    log = SegmentLog.open(path, CONFIG)
    for _, k, v in ALL:
        log.append(build_batch([(k, v)], timestamp_ms=1000), now_ms=1000)
    log.roll()
    return log


def _abandon(log: SegmentLog) -> None:
    """What a kill leaves: files as they are, no clean shutdown marker."""
    for segment in log.segments:
        HANDLES.close(segment.log_path)  # type: ignore[attr-defined]


def _offsets(log: SegmentLog) -> list[int]:
    """Every offset the headers cover, batch by batch: contiguous from start to end."""
    covered: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for _, h in iter_batch_headers(log.read(offset, 1 << 20)):
            covered += range(h.base_offset, h.last_offset + 1)
            offset = h.last_offset + 1
    return covered


def _reopened(path: Path) -> SegmentLog:
    log = SegmentLog.open(path, CONFIG)
    assert _offsets(log) == list(range(24))
    assert not [p for p in path.iterdir() if p.suffix in (".cleaned", ".swap")]
    return log


def _cleaned_after_reopen(path: Path, cleaned: bool) -> None:
    log = _reopened(path)
    got = records(log)
    if cleaned:
        assert got == [r for r in ALL if r[0] >= 20]
    else:
        assert got == ALL
    job = plan_cleaning(log, 2000, None, 0)  # and it cleans to the same result afterwards
    assert job is not None
    _swap(run_cleaning(job))
    assert records(log) == [r for r in ALL if r[0] >= 20]
    log.close()
    assert records(SegmentLog.open(path, CONFIG)) == [r for r in ALL if r[0] >= 20]


def test_a_pass_that_completes_survives_a_restart(tmp_path: Path) -> None:
    log = _filled(tmp_path)
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None and len(job.segments) > 2
    result = run_cleaning(job)
    assert _swap(result) == result.stats.segments_rewritten > 0
    assert records(log) == [r for r in ALL if r[0] >= 20]
    _abandon(log)
    _cleaned_after_reopen(tmp_path, cleaned=True)


def _crash_at(monkeypatch: pytest.MonkeyPatch, when: Callable[[Path, Path], bool]) -> None:
    real = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if when(Path(src), Path(dst)):
            raise Crash
        real(src, dst)

    monkeypatch.setattr(cleaned_segment.os, "replace", replace)
    monkeypatch.setattr(FileCopy, "discard", lambda self: None)  # a killed process cleans nothing


@pytest.mark.parametrize(
    ("point", "when", "cleaned"),
    [
        ("writing the copy", lambda s, d: False, False),
        ("before the index commit", lambda s, d: d.name.endswith(".index.swap"), False),
        ("before the log commit", lambda s, d: d.name.endswith(".log.swap"), False),
        ("mid-install, indexes in", lambda s, d: d.suffix == ".log" and s.suffix == ".swap", True),
        ("mid-install, none in", lambda s, d: d.suffix == ".index" and s.suffix == ".swap", True),
    ],
)
def test_kill_at_each_point_of_a_pass(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    point: str,
    when: Callable[[Path, Path], bool],
    cleaned: bool,
) -> None:
    log = _filled(tmp_path)
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None
    _crash_at(monkeypatch, when)
    if point == "writing the copy":
        monkeypatch.setattr(FileCopy, "finish", _torn_finish)
    with pytest.raises(Crash):
        _swap(run_cleaning(job))
    assert [p for p in tmp_path.iterdir() if p.suffix in (".cleaned", ".swap")], point
    _abandon(log)
    monkeypatch.undo()
    _cleaned_after_reopen(tmp_path, cleaned)


def _torn_finish(self: FileCopy) -> None:
    """Killed while the copy is half written: a torn `.cleaned` file, nothing renamed."""
    os.ftruncate(self.segment.fd, self.segment.size // 2)  # type: ignore[attr-defined]
    raise Crash


def test_a_copy_whose_segment_was_deleted_meanwhile_is_dropped(tmp_path: Path) -> None:
    log = _filled(tmp_path)
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None
    result = run_cleaning(job)
    first = log.segments[0]
    log.config = LogConfig(segment_bytes=600, retention_ms=1, cleanup_policy="compact,delete")
    assert log.apply_retention(now_ms=10**9) > 0  # retention ran between the pass and the swap
    assert not any(s is first for s in log.segments)
    _swap(result)
    assert not (tmp_path / first.log_path.name).exists()  # type: ignore[attr-defined]
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".cleaned", ".swap")]


def test_reads_see_the_old_segment_until_the_swap_and_the_copy_after(tmp_path: Path) -> None:
    log = _filled(tmp_path)
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None
    before = log.read(0, 1 << 20)
    result = run_cleaning(job)  # committed copies on disk, not yet swapped in
    assert log.read(0, 1 << 20) == before
    assert records(log) == ALL
    _swap(result)
    assert records(log) == [r for r in ALL if r[0] >= 20]
    assert _offsets(log) == list(range(24))


def test_a_cleaned_segment_answers_max_timestamp_from_what_survived(tmp_path: Path) -> None:
    """The largest data timestamp of a segment may belong to a record the cleaner removes.
    The copy carries its own maximum; the original's saved one (written at seal because a
    share-state control batch held the segment's largest timestamp) does not outlive it."""
    from protocol.record_batch import build_control_batch
    from storage.segment import DATA_MAX_SUFFIX

    log = SegmentLog.open(tmp_path, CONFIG)
    log.append(build_batch([(b"k1", b"old")], timestamp_ms=9000), now_ms=1)  # the maximum
    log.append(build_batch([(b"k2", b"v")], timestamp_ms=10), now_ms=1)
    log.append_control(build_control_batch(0, -1, -1, 99_999, [(b"\0\0\0\5", b"")]), now_ms=1)
    log.roll()
    log.append(build_batch([(b"k1", b"new")], timestamp_ms=20), now_ms=1)  # offset 3
    log.roll()
    assert log.offset_for_max_timestamp() == (0, 9000)
    assert list(tmp_path.glob(f"*{DATA_MAX_SUFFIX}"))  # saved at seal: a control batch is last
    job = plan_cleaning(log, 10**6, None, 0)
    assert job is not None
    assert _swap(run_cleaning(job)) == 1
    assert log.offset_for_max_timestamp() == (3, 20)
    assert not list(tmp_path.glob(f"*{DATA_MAX_SUFFIX}"))
    log.close()
    assert SegmentLog.open(tmp_path, CONFIG).offset_for_max_timestamp() == (3, 20)


def test_a_kill_after_markers_are_cleaned_rebuilds_the_lso_and_aborted_index(
    tmp_path: Path,
) -> None:
    """kill -9 after a pass removed transaction markers (their records gone in an earlier
    pass): the producer state rebuilt at open has no open transaction (LSO = log end) and
    no aborted transaction whose marker is gone; a transaction whose marker is kept stays."""
    from protocol.record_batch import TRANSACTIONAL_MASK

    config = replace(CONFIG, delete_retention_ms=1000)
    log = SegmentLog.open(tmp_path, config)

    def txn(pid: int, key: bytes) -> None:
        batch = build_batch(
            [(key, b"t")],
            timestamp_ms=1000,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
            attributes=TRANSACTIONAL_MASK,
        )
        log.append(batch, now_ms=1000)  # fmt: skip

    txn(7, b"k")
    log.append_marker(7, 0, False, now_ms=1000)  # aborted: removed by the first pass
    txn(8, b"j")
    log.append_marker(8, 0, True, now_ms=1000)  # committed, superseded below
    txn(9, b"i")
    log.append_marker(9, 0, False, now_ms=1000)  # aborted too
    log.append(build_batch([(b"j", b"plain")], timestamp_ms=1000), now_ms=1000)
    log.roll()
    _swap(run_cleaning(_job(log, 3000)))
    assert len(log.aborted_transactions(0, log.log_end_offset)) == 2
    _swap(run_cleaning(_job(log, 3000)))  # the markers go: no batch of theirs is left
    assert log.aborted_transactions(0, log.log_end_offset) == []
    end = log.log_end_offset
    _abandon(log)  # kill -9
    again = SegmentLog.open(tmp_path, config)
    assert again.last_stable_offset == again.log_end_offset == end
    assert again.aborted_transactions(0, end) == []
    got = [(h.base_offset, h.is_control) for _, h in iter_batch_headers(again.read(0, 1 << 20))]
    assert not [o for o, control in got if control]


def _job(log: SegmentLog, now_ms: int) -> CleaningJob:
    job = plan_cleaning(log, now_ms, None, 0)
    assert job is not None
    return job
