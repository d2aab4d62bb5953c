"""Sealed segments are opened lazily: a start costs per partition, not per segment (issue 28).

Opening a log read both index files of every sealed segment and walked each one's tail: with
5,000 partitions of four segments, most of a clean start. As Kafka's `LazyIndex` defers a
segment's index files until they are used (storage/src/main/java/org/apache/kafka/storage/
internals/log/LazyIndex.java), a sealed segment is now read when first used; where it ends and
how old it is come from the log's one `sealed-segments` file, so gaps between segments are
still found at open and retention reads nothing. A file that is lost, torn or stale only costs
reading the segments it no longer describes, at open, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.record_batch import build_batch
from storage import LogConfig
from storage import SegmentLog
from storage.sealed_segments import SEALED_SEGMENTS
from storage.segment import FileSegment

TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def make_log(directory: Path) -> tuple[list[int], int]:
    """60 batches over several segments, closed cleanly; (segment bases, log end)."""
    log = SegmentLog.open(directory, CONFIG)
    for i in range(60):
        log.append(build_batch([(None, b"v%03d" % i)] * 2, timestamp_ms=TS + i), now_ms=TS + i)
    bases, end = [s.base_offset for s in log.segments], log.log_end_offset
    log.close()
    assert len(bases) >= 5
    return bases, end


def files_opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the files opened from now on (`os.open`: file handles, `Path.read_bytes`)."""
    opened: list[str] = []
    real: Callable[..., int] = os.open

    def recording(path: str | os.PathLike[str], *args: int, **kwargs: int) -> int:
        opened.append(os.path.basename(os.fspath(path)))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording)
    real_read: Callable[[Path], bytes] = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        opened.append(self.name)
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return opened


def stems(bases: list[int]) -> set[str]:
    return {f"{b:020d}" for b in bases}


def test_a_clean_open_reads_no_sealed_segment_until_it_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bases, end = make_log(tmp_path)
    opened = files_opened(monkeypatch)
    log = SegmentLog.open(tmp_path, CONFIG)
    sealed = stems(bases[:-1])
    assert not [n for n in opened if n.split(".")[0] in sealed]
    assert [s.loaded for s in log.segments] == [False] * (len(bases) - 1) + [True]
    assert log.log_end_offset == end
    # Retention, the damage metric and a close read nothing of them either.
    assert log.apply_retention(TS + 60) == 0 and log.damaged_ranges() == []
    assert [s.base_offset for s in log.segments if s.loaded] == [bases[-1]]

    middle = bases[2]
    (span,) = log.batch_spans(middle + 1, 1)
    assert span.base_offset <= middle + 1 <= span.last_offset
    assert [s.base_offset for s in log.segments if s.loaded] == [middle, bases[-1]]
    read_sealed = {n.split(".")[0] for n in opened if n.split(".")[0] in sealed}
    assert read_sealed == stems([middle])
    log.close()


def test_a_lazy_segment_serves_as_a_loaded_one(tmp_path: Path) -> None:
    _, end = make_log(tmp_path)
    lazy = SegmentLog.open(tmp_path, CONFIG)
    served = lazy.read(0, 1 << 20)
    by_offset = [lazy.offset_for_timestamp(TS + i) for i in range(0, 60, 7)]
    lazy.close()
    (tmp_path / SEALED_SEGMENTS).unlink()
    eager = SegmentLog.open(tmp_path, CONFIG)  # no file: every segment loaded at open
    assert all(s.loaded for s in eager.segments)
    assert eager.read(0, 1 << 20) == served
    assert [eager.offset_for_timestamp(TS + i) for i in range(0, 60, 7)] == by_offset
    assert eager.log_end_offset == end
    eager.close()
    assert (tmp_path / SEALED_SEGMENTS).exists()  # written again by that close


@pytest.mark.parametrize("how", ["torn", "stale"])
def test_a_torn_or_stale_file_costs_only_reading_what_it_no_longer_describes(
    tmp_path: Path, how: str
) -> None:
    bases, end = make_log(tmp_path)
    path = tmp_path / SEALED_SEGMENTS
    if how == "torn":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        expect_loaded = bases[:-1]
    else:  # the second segment cut after the file was written
        second = tmp_path / f"{bases[1]:020d}.log"
        data = second.read_bytes()
        second.write_bytes(data[: len(data) // 2])  # damage found at open, as before
        expect_loaded = [bases[1]]
    log = SegmentLog.open(tmp_path, CONFIG)
    assert [s.base_offset for s in log.segments[:-1] if s.loaded] == expect_loaded
    assert log.log_end_offset == end
    assert isinstance(log.segments[0], FileSegment)
    log.close()
