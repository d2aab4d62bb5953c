"""PartitionLog behaviour, run against both SegmentLog (disk) and MemoryLog."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from kio.records.readers import read_batch

from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key
from protocol.record_batch import iter_batch_headers
from storage import LogConfig
from storage import MemoryLog
from storage import OffsetOutOfRange
from storage import OutOfOrderSequence
from storage import SegmentLog
from storage.base_log import SegmentedLog
from storage.errors import InvalidProducerEpoch

TS = 1_700_000_000_000
MakeLog = Callable[[LogConfig], SegmentedLog]


def batch(
    n: int = 1,
    *,
    ts: int = TS,
    value: bytes = b"v" * 20,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> bytes:
    records = [(str(i).encode(), value) for i in range(n)]
    return build_batch(
        records, timestamp_ms=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


@pytest.fixture(params=["disk", "memory"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> MakeLog:
    def make(config: LogConfig) -> SegmentedLog:
        if request.param == "memory":
            return MemoryLog(config)
        return SegmentLog.open(tmp_path / "t-0", config)

    return make


def read_all(log: SegmentedLog) -> list[tuple[int, int, bytes]]:
    """(base, last, bytes) of every stored batch, following reads across segments."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data
        for pos, h in iter_batch_headers(data):
            out.append((h.base_offset, h.last_offset, data[pos : pos + h.size]))
        offset = out[-1][1] + 1
    return out


def test_append_assigns_offsets_and_reads_back_across_rolls(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=700, index_interval_bytes=150))
    results = [log.append(batch(1 + i % 4, ts=TS + i), now_ms=TS) for i in range(40)]
    assert [r.base_offset for r in results][:4] == [0, 1, 3, 6]
    assert all(b.base_offset == a.last_offset + 1 for a, b in pairwise(results))
    assert log.log_end_offset == results[-1].last_offset + 1
    assert len(log.segments) > 4
    stored = read_all(log)
    assert [(b, last) for b, last, _ in stored] == [(r.base_offset, r.last_offset) for r in results]
    for i, (base, _, data) in enumerate(stored):
        decoded, _ = read_batch(data, 0)  # CRC still valid after the offset rewrite
        assert [r.offset for r in decoded.records] == list(range(base, base + 1 + i % 4))
    for offset in range(log.log_end_offset):
        (first,) = log.batch_spans(offset, 1)
        assert first.base_offset <= offset <= first.last_offset


def test_read_from_middle_of_batch_returns_whole_batch(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    log.append(batch(3), now_ms=TS)
    log.append(batch(5), now_ms=TS)
    data = log.read(5, 10_000)
    decoded, size = read_batch(data, 0)
    assert size == len(data)
    assert [r.offset for r in decoded.records] == [3, 4, 5, 6, 7]


def test_a_read_at_the_tail_walks_no_header_before_its_batch(make_log: MakeLog) -> None:
    # Consumers read at the tail, one small batch at a time: the walk starts at the batch
    # itself, not at the last sparse index entry (an index interval of headers back), or
    # there is none (`TAIL_READ`: its header is read alone, test_storage_tail_read.py).
    log = make_log(LogConfig())
    for _ in range(40):
        log.append(batch(1), now_ms=TS)
    segment = log.segments[-1]
    walks: list[int] = []
    walk = segment.iter_headers

    def recording(position: int = 0, *, strict: bool = False) -> Iterator[tuple[int, Any]]:
        walks.append(position)
        return walk(position, strict=strict)

    segment.iter_headers = recording  # type: ignore[method-assign]
    for offset in (39, 25, 0):
        walks.clear()
        located = segment.locate(offset)
        assert located is not None
        assert walks in ([], [located[0]])
        assert located[1].base_offset == offset
    assert read_all(log)[-1][0] == 39


def test_max_bytes_honoured_but_at_least_one_batch(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    sizes = [len(batch(2, value=b"x" * (10 * i))) for i in range(1, 5)]
    for i in range(1, 5):
        log.append(batch(2, value=b"x" * (10 * i)), now_ms=TS)
    assert len(log.read(0, 1)) == sizes[0]
    assert len(log.read(0, sizes[0] + sizes[1])) == sizes[0] + sizes[1]
    assert len(log.read(0, sizes[0] + sizes[1] + 5)) == sizes[0] + sizes[1]
    assert len(log.read(2, 1 << 20)) == sum(sizes[1:])
    data, spans = log.read_with_spans(3, sizes[1] + sizes[2])
    assert [(s.base_offset, s.position_in_result, s.size) for s in spans] == [
        (2, 0, sizes[1]),
        (4, sizes[1], sizes[2]),
    ]
    assert len(data) == sizes[1] + sizes[2]


def test_max_records_limits_spans(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    for _ in range(5):
        log.append(batch(3), now_ms=TS)
    data, spans = log.read_with_spans(4, 1 << 20, max_records=3)
    # offsets 4-5 from the first batch, then the next batch reaches the limit.
    assert [(s.base_offset, s.last_offset) for s in spans] == [(3, 5), (6, 8)]
    assert len(data) == sum(s.size for s in spans)
    assert len(log.batch_spans(0, 1 << 20, max_records=1)) == 1
    assert len(log.batch_spans(4, 1 << 20, max_records=2)) == 1  # 4-5 already make 2
    assert len(log.batch_spans(4, 1 << 20, max_records=3)) == 2


def test_offset_out_of_range(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    assert log.read(0, 100) == b""
    log.append(batch(2), now_ms=TS)
    assert log.read(2, 100) == b""
    assert log.read_with_spans(2, 100) == (b"", [])
    with pytest.raises(OffsetOutOfRange) as info:
        log.read(3, 100)
    assert info.value.error_code.name == "offset_out_of_range"
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_corrupt_input_is_rejected_and_nothing_written(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    bad = bytearray(batch(2))
    bad[-1] ^= 1
    with pytest.raises(InvalidRecordBatch) as info:
        log.append(bytes(bad), now_ms=TS)
    assert info.value.reason == "crc"
    with pytest.raises(InvalidRecordBatch):
        log.append(batch(1) + bytes(bad), now_ms=TS)  # one bad batch spoils the request
    assert log.log_end_offset == 0
    control = build_control_batch(0, -1, -1, TS, [(control_record_key(0), b"")])
    with pytest.raises(InvalidRecordBatch):
        log.append(control, now_ms=TS)
    with pytest.raises(InvalidRecordBatch):
        log.append_control(batch(1), now_ms=TS)


def test_multi_batch_append(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    result = log.append(batch(2) + batch(3) + batch(1), now_ms=TS)
    assert (result.base_offset, result.last_offset) == (0, 5)
    assert [(b, last) for b, last, _ in read_all(log)] == [(0, 1), (2, 4), (5, 5)]


def test_control_batch_append(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    log.append(batch(2), now_ms=TS)
    control = build_control_batch(0, -1, -1, TS, [(control_record_key(5), b"state")])
    result = log.append_control(control, now_ms=TS)
    assert (result.base_offset, result.last_offset) == (2, 2)
    log.append(batch(1), now_ms=TS)
    spans = log.batch_spans(0, 1 << 20)
    assert [(s.base_offset, s.is_control) for s in spans] == [(0, False), (2, True), (3, False)]


def test_idempotent_duplicate_returns_original_offsets(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    first = log.append(batch(3, pid=7, epoch=0, seq=0), now_ms=TS)
    log.append(batch(2, pid=7, epoch=0, seq=3), now_ms=TS)
    log.append(batch(1), now_ms=TS)
    again = log.append(batch(3, pid=7, epoch=0, seq=0), now_ms=TS)
    assert again.duplicate and not first.duplicate
    assert (again.base_offset, again.last_offset) == (first.base_offset, first.last_offset)
    assert log.log_end_offset == 6
    assert len(read_all(log)) == 3


def test_only_last_five_batches_are_deduplicated(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    for seq in range(7):
        log.append(batch(1, pid=1, epoch=0, seq=seq), now_ms=TS)
    assert log.append(batch(1, pid=1, epoch=0, seq=2), now_ms=TS).duplicate
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(1, pid=1, epoch=0, seq=1), now_ms=TS)


def test_sequence_and_epoch_rules(make_log: MakeLog) -> None:
    log = make_log(LogConfig())
    log.append(batch(2, pid=9, epoch=3, seq=10), now_ms=TS)  # unknown producer: any start
    with pytest.raises(OutOfOrderSequence) as info:
        log.append(batch(1, pid=9, epoch=3, seq=13), now_ms=TS)
    assert info.value.error_code.name == "out_of_order_sequence_number"
    with pytest.raises(InvalidProducerEpoch):
        log.append(batch(1, pid=9, epoch=2, seq=12), now_ms=TS)
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(1, pid=9, epoch=4, seq=5), now_ms=TS)
    assert log.log_end_offset == 2
    assert not log.append(batch(1, pid=9, epoch=4, seq=0), now_ms=TS).duplicate
    with pytest.raises(InvalidProducerEpoch):
        log.append(batch(1, pid=9, epoch=3, seq=12), now_ms=TS)
    # Sequences wrap at int32.
    log.append(batch(1, pid=10, epoch=0, seq=2**31 - 1), now_ms=TS)
    log.append(batch(2, pid=10, epoch=0, seq=0), now_ms=TS)
    # Two batches of one producer in one append must follow each other too.
    with pytest.raises(OutOfOrderSequence):
        log.append(batch(1, pid=10, epoch=0, seq=2) + batch(1, pid=10, epoch=0, seq=4), now_ms=TS)
    log.append(batch(1, pid=10, epoch=0, seq=2) + batch(1, pid=10, epoch=0, seq=3), now_ms=TS)


def test_offset_for_timestamp(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_bytes=500, index_interval_bytes=100))
    stamps = [TS + 10 * i for i in range(30)]
    stamps[10] = TS + 1000  # an out-of-order spike
    for stamp in stamps:
        log.append(batch(2, ts=stamp), now_ms=TS)
    assert log.offset_for_timestamp(TS) == (0, TS)
    assert log.offset_for_timestamp(TS + 15) == (4, TS + 20)
    assert log.offset_for_timestamp(TS + 95) == (20, TS + 1000)
    assert log.offset_for_timestamp(TS + 1001) is None
    assert log.offset_for_timestamp(0) == (0, TS)


def test_roll_by_segment_ms(make_log: MakeLog) -> None:
    log = make_log(LogConfig(segment_ms=1000))
    log.append(batch(), now_ms=TS)
    log.append(batch(), now_ms=TS + 999)
    assert len(log.segments) == 1
    log.append(batch(), now_ms=TS + 1000)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_retention_by_bytes(make_log: MakeLog) -> None:
    size = len(batch())
    log = make_log(LogConfig(segment_bytes=size * 2, retention_bytes=size * 3, retention_ms=-1))
    for _ in range(10):
        log.append(batch(), now_ms=TS)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8]
    # Oldest segments go while what remains is still at least retention.bytes.
    assert log.apply_retention(TS) == 3
    assert [s.base_offset for s in log.segments] == [6, 8]
    assert log.log_start_offset == 6
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 100)
    assert len(log.read(6, 1 << 20)) == size * 2
    assert log.apply_retention(TS) == 0


def test_retention_respects_min_retained_offset(make_log: MakeLog) -> None:
    size = len(batch())
    log = make_log(LogConfig(segment_bytes=size * 2, retention_bytes=0, retention_ms=-1))
    for _ in range(10):
        log.append(batch(), now_ms=TS)
    assert log.apply_retention(TS, min_retained_offset=5) == 2
    assert log.log_start_offset == 4  # the segment holding 5 stays
    assert log.apply_retention(TS, min_retained_offset=6) == 1
    assert log.log_start_offset == 6


def test_retention_by_time_never_deletes_active_segment(make_log: MakeLog) -> None:
    size = len(batch())
    log = make_log(LogConfig(segment_bytes=size * 2, retention_ms=1000))
    for i in range(6):
        log.append(batch(ts=TS + 100 * i), now_ms=TS)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.apply_retention(TS + 1100) == 0  # segment 0 newest batch is TS+100
    assert log.apply_retention(TS + 1101) == 1
    assert log.apply_retention(TS + 100_000) == 1
    assert [s.base_offset for s in log.segments] == [4]
    assert log.apply_retention(TS + 10**9) == 0
    log.append(batch(), now_ms=TS)
    assert log.log_end_offset == 7


def test_flush_every_message(make_log: MakeLog) -> None:
    log = make_log(LogConfig(flush_messages=1))
    log.append(batch(), now_ms=TS)
    assert not any(s.dirty for s in log.segments)
    log = make_log(LogConfig(flush_messages=3))
    log.append(batch(2), now_ms=TS)
    assert log.segments[-1].dirty
    log.append(batch(1), now_ms=TS)
    assert not log.segments[-1].dirty
