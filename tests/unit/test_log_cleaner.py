"""The log cleaner on MemoryLog: latest record per key, tombstones, share state at the ESO,
the dirty ratio, and what a cleaned segment looks like from its headers."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_partition_manager import SharePartitionManager
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import Compression
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key
from protocol.record_batch import iter_batch_headers
from protocol.record_batch import read_varint
from protocol.records import StoredBatch
from protocol.records import build_stored_batch
from protocol.records import decode_records
from protocol.records import encode_run
from storage.base_log import SegmentedLog
from storage.cleaner import CleaningResult
from storage.cleaner import plan_cleaning
from storage.cleaner import run_cleaning
from storage.cleaner import swap_in
from storage.config import LogConfig
from storage.errors import InvalidRecord
from storage.memory_log import MemoryLog
from storage.memory_log import MemoryLogs

DAY = 24 * 3600 * 1000
COMPACT = LogConfig(
    segment_bytes=400,
    index_interval_bytes=64,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=DAY,
)
Pair = tuple[bytes | None, bytes | None]


def put(log: SegmentedLog, pairs: Sequence[Pair], ts: int = 1000) -> int:
    return log.append(build_batch(list(pairs), timestamp_ms=ts), now_ms=ts).base_offset


def records(log: SegmentedLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every data record readable from the log: (offset, key, value)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, h in iter_batch_headers(data):
            offset = h.last_offset + 1
            if h.is_control or h.record_count == 0:
                continue
            _, recs = decode_records(data[pos : pos + h.size])
            for r in recs:
                value = _value(r.tail, r.key)
                out.append((h.base_offset + r.offset_delta, r.key, value))
    return out


def _value(tail: bytes, key: bytes | None) -> bytes | None:
    _, p = read_varint(tail, 0)
    p += len(key) if key is not None else 0
    n, p = read_varint(tail, p)
    return None if n < 0 else tail[p : p + n]


def clean(log: SegmentedLog, now_ms: int = 2000, eso: int | None = None) -> CleaningResult:
    job = plan_cleaning(log, now_ms, eso, 0)
    assert job is not None
    result = run_cleaning(job)
    swap_in(result)
    return result


def filled(log: SegmentedLog) -> SegmentedLog:
    """k0..k4 = v1, then k0..k2 = v2, then rolled: everything sealed."""
    for i in range(5):
        put(log, [(b"k%d" % i, b"v1-%d" % i)])
    put(log, [(b"k%d" % i, b"v2-%d" % i) for i in range(3)])
    log.roll()
    return log


def test_latest_record_per_key_kept_at_its_offset() -> None:
    log = filled(MemoryLog(COMPACT))
    end = log.log_end_offset
    result = clean(log)
    assert records(log) == [
        (3, b"k3", b"v1-3"),
        (4, b"k4", b"v1-4"),
        (5, b"k0", b"v2-0"),
        (6, b"k1", b"v2-1"),
        (7, b"k2", b"v2-2"),
    ]
    assert log.log_end_offset == end and log.log_start_offset == 0
    assert result.stats.records_removed == 3


def test_removed_offsets_show_in_headers_as_empty_batches() -> None:
    log = MemoryLog(COMPACT)
    put(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
    put(log, [(b"b", b"2"), (b"c", b"2")])
    log.roll()
    clean(log)
    spans = log.batch_spans(0, 1 << 20)
    layout = [(s.base_offset, s.last_offset, s.has_records) for s in spans]
    # a survives; b, c (offsets 1-2) are gone; d survives; the second batch survives whole.
    assert layout == [(0, 0, True), (1, 2, False), (3, 3, True), (4, 5, True)]
    # Offsets stay contiguous batch to batch: a cleaned copy is cleaned again unchanged.
    assert clean_again_changes_nothing(log)


def clean_again_changes_nothing(log: SegmentedLog) -> bool:
    job = plan_cleaning(log, 2000, None, 0)
    return job is not None and run_cleaning(job).copies == []


def test_tombstone_removed_only_after_delete_retention() -> None:
    log = MemoryLog(COMPACT)
    put(log, [(b"k", b"v")], ts=1000)
    put(log, [(b"k", None)], ts=1000)
    log.roll()
    clean(log, now_ms=1000 + DAY)  # not yet older than delete.retention.ms
    assert records(log) == [(1, b"k", None)]
    clean(log, now_ms=1000 + DAY + 1)
    assert records(log) == []
    assert [s.has_records for s in log.batch_spans(0, 1 << 20)] == [False]


def _control(log: SegmentedLog) -> int:
    batch = build_control_batch(0, -1, -1, 1000, [(control_record_key(5), b"state")])
    return log.append_control(batch, now_ms=1000).base_offset


def _control_offsets(log: SegmentedLog) -> list[int]:
    offsets = []
    offset = 0
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        for _, h in iter_batch_headers(chunk):
            offset = h.last_offset + 1
            if h.is_control:
                offsets.append(h.base_offset)
    return offsets


@pytest.mark.parametrize(("eso", "kept"), [(None, [1, 3, 5]), (3, [3, 5]), (6, [])])
def test_share_state_control_batches_kept_from_the_eso(eso: int | None, kept: list[int]) -> None:
    log = MemoryLog(COMPACT)
    put(log, [(b"k", b"1")])
    assert _control(log) == 1
    put(log, [(b"k", b"2")])
    assert _control(log) == 3
    put(log, [(b"k", b"3")])
    assert _control(log) == 5
    log.roll()
    clean(log, eso=eso)
    assert _control_offsets(log) == kept
    assert records(log) == [(4, b"k", b"3")]


def test_dirty_ratio_decides_when_a_log_is_worth_cleaning() -> None:
    config = dataclasses.replace(COMPACT, min_cleanable_dirty_ratio=0.5)
    log = filled(MemoryLog(config))
    job = plan_cleaning(log, 2000, None, 0)
    assert job is not None  # nothing cleaned yet: all of it is dirty
    swap_in(run_cleaning(job))
    put(log, [(b"k9", b"x")])
    log.roll()
    # Only the new, small segment is dirty: below half of the cleanable bytes.
    assert plan_cleaning(log, 2000, None, job.end_offset) is None
    assert plan_cleaning(log, 2000, None, 0) is not None


def test_min_compaction_lag_keeps_young_segments_out() -> None:
    config = dataclasses.replace(COMPACT, min_compaction_lag_ms=500)
    log = filled(MemoryLog(config))
    assert plan_cleaning(log, 1400, None, 0) is None
    assert plan_cleaning(log, 1500, None, 0) is not None


def test_only_compacted_logs_are_cleaned_and_switching_takes_effect() -> None:
    log = filled(MemoryLog(dataclasses.replace(COMPACT, cleanup_policy="delete")))
    assert plan_cleaning(log, 2000, None, 0) is None
    log.config = dataclasses.replace(log.config, cleanup_policy="compact,delete")
    clean(log)
    assert len(records(log)) == 5


def test_null_key_refused_on_compacted_topics_only() -> None:
    with pytest.raises(InvalidRecord):
        put(MemoryLog(COMPACT), [(b"k", b"v"), (None, b"v")])
    put(MemoryLog(), [(None, b"v")])


@pytest.mark.parametrize(
    "codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD], ids=lambda c: c.name.lower()
)
def test_a_refused_append_names_each_keyless_record_of_the_first_bad_batch(
    codec: Compression,
) -> None:
    """Kafka's LogValidator (storage/.../log/LogValidator.java, `validateKey`,
    `processRecordErrors`): record errors are per batch, by index in that batch, and the
    first batch with any fails the append, nothing of it written (KIP-467)."""
    log = MemoryLog(COMPACT)
    good = build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=1000)
    plain = build_batch([(b"c", b"3"), (None, b"4"), (b"d", b"5"), (None, b"6")], timestamp_ms=1000)
    fields = StoredBatch(
        base_offset=0, last_offset=3, attributes=codec, base_timestamp=1000,
        max_timestamp=1000, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=4,
    )  # fmt: skip
    bad = build_stored_batch(fields, encode_run(decode_records(plain)[1], 0))
    worse = build_batch([(None, b"7")], timestamp_ms=1000)
    with pytest.raises(InvalidRecord) as refused:
        log.append(good + bad + worse, now_ms=1000)
    assert [e.batch_index for e in refused.value.record_errors] == [1, 3]
    assert all(e.message for e in refused.value.record_errors)
    assert "2 of 4" in str(refused.value)
    assert log.log_end_offset == 0  # the good batch before it is not written either


@pytest.mark.parametrize(
    "codec",
    [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD],
    ids=lambda c: c.name.lower(),
)
def test_compressed_batches_are_cleaned_and_keep_their_codec(codec: Compression) -> None:
    log = MemoryLog(COMPACT)
    recs = [(b"k%d" % (i % 3), b"value-%d" % i) for i in range(9)]
    plain = build_batch(recs, timestamp_ms=1000)
    _, decoded = decode_records(plain)
    fields = StoredBatch(
        base_offset=0, last_offset=8, attributes=codec, base_timestamp=1000,
        max_timestamp=1000, producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=9,
    )  # fmt: skip
    log.append(build_stored_batch(fields, encode_run(decoded, 0)), now_ms=1000)  # keys read
    log.roll()
    result = clean(log)
    assert records(log) == [(6, b"k0", b"value-6"), (7, b"k1", b"value-7"), (8, b"k2", b"value-8")]
    assert result.stats.unreadable_batches == 0
    data = log.read(6, 1 << 20)
    assert [h.compression for _, h in iter_batch_headers(data)] == [codec]


def test_unreadable_batch_is_kept_whole_never_dropped() -> None:
    log = MemoryLog(dataclasses.replace(COMPACT, cleanup_policy="delete"))
    fake = _corrupt_snappy_batch()
    log.append(fake, now_ms=1000)
    put(log, [(b"k", b"v2")])
    log.config = COMPACT  # the topic became compacted after the bad batch was written
    with pytest.raises(InvalidRecordBatch):  # CORRUPT_MESSAGE at produce
        log.append(fake, now_ms=1000)
    log.roll()
    result = clean(log)
    assert result.stats.unreadable_batches == 1
    assert [(s.base_offset, s.has_records) for s in log.batch_spans(0, 1 << 20)] == [
        (0, True),
        (1, True),
    ]


def _corrupt_snappy_batch() -> bytes:
    """A batch flagged snappy whose payload is not snappy: nobody can read it."""
    import struct

    import crc32c

    batch = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1000))
    struct.pack_into(">h", batch, 21, Compression.SNAPPY)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_idempotent_runs_keep_producer_and_retries_are_still_duplicates() -> None:
    log = MemoryLog(COMPACT)
    first = build_batch(
        [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
        timestamp_ms=1000, producer_id=7, producer_epoch=0, base_sequence=0,
    )  # fmt: skip
    last = build_batch(
        [(b"a", b"2")], timestamp_ms=1000, producer_id=7, producer_epoch=0, base_sequence=3
    )
    log.append(first, now_ms=1000)
    log.append(last, now_ms=1000)
    log.roll()
    clean(log)
    data = log.read(0, 1 << 20)
    kept = [(h.base_offset, h.producer_id, h.base_sequence) for _, h in iter_batch_headers(data)]
    assert kept == [(0, -1, -1), (1, 7, 1), (3, 7, 3)]
    assert log.append(last, now_ms=1000).duplicate


def test_share_group_archives_cleaned_offsets() -> None:
    """Offsets of an empty batch are archived from headers alone, never handed out."""
    logs = MemoryLogs()
    log = MemoryLog(COMPACT)
    info = logs.create_topic("t", logs=[log])
    filled(log)
    clean(log)
    configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
    configs.alter("g", {"share.auto.offset.reset": "earliest"})
    manager = SharePartitionManager(logs, configs)
    handed: list[int] = []
    while True:
        got = manager.fetch("g", "m", info.topic_id, 0, max_bytes=1 << 20, max_records=99, now_ms=1)
        if not got.acquired:
            break
        handed += [o for a in got.acquired for o in range(a.first_offset, a.last_offset + 1)]
    assert handed == [3, 4, 5, 6, 7]


def test_lag_of_a_share_group_does_not_count_cleaned_offsets() -> None:
    logs = MemoryLogs()
    log = MemoryLog(COMPACT)
    info = logs.create_topic("t", logs=[log])
    filled(log)
    clean(log)
    configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
    configs.alter("g", {"share.auto.offset.reset": "earliest"})
    manager = SharePartitionManager(logs, configs)
    manager.get("g", info.topic_id, 0, 1)  # initialised at the log start, nothing delivered
    described = ShareGroupOffsets(manager, logs, lambda: 1).describe("g", info, 0)
    assert described.lag == 5  # k3, k4 and the three latest values; offsets 0-2 are gone
