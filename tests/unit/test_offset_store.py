"""The committed-offset store over its internal compacted log: recovery, tombstones, a torn
tail, cleaning, and the commit validators' rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from coordinator.offset_store import OffsetStore
from protocol.consumer_offsets import OffsetKey
from protocol.consumer_offsets import OffsetRecords
from protocol.consumer_offsets import OffsetValue
from protocol.consumer_offsets import decode_key
from protocol.consumer_offsets import decode_value
from protocol.consumer_offsets import encode_key
from protocol.consumer_offsets import encode_value
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage.cleaner import plan_cleaning
from storage.cleaner import run_cleaning
from storage.cleaner import swap_in
from storage.config import LogConfig
from storage.errors import InvalidTopic
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from storage.segment_log import SegmentLog
from storage.topics import CONSUMER_OFFSETS
from tests.unit.test_log_cleaner import records
from tests.unit.test_storage_write_failure import FillingDisk
from tests.unit.test_storage_write_failure import disk

__all__ = ["disk"]  # the fixture, shared


def now() -> int:
    return 1_000


def open_store(data: Path, config: LogConfig | None = None) -> tuple[LogManager, OffsetStore]:
    logs = LogManager(data, config)
    return logs, OffsetStore.open(logs, now)


def test_kafkas_record_layout_round_trips() -> None:
    key = OffsetKey("g", "t", 3)
    value = OffsetValue(42, 5, "meta", 1234)
    # OffsetCommitKey v1: int16 version, then group, topic (int16-length strings), partition.
    assert encode_key(key) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert encode_value(value)[:2] == b"\x00\x03"  # OffsetCommitValue v3
    assert decode_key(encode_key(key)) == key
    assert decode_value(encode_value(value)) == value
    assert decode_key(b"\x00\x02\x00\x01g") is None  # group metadata: not an offset


def test_a_commit_encoded_a_record_at_a_time_is_the_batch_build_batch_makes() -> None:
    """`OffsetRecords` (what a large OffsetCommit encodes in slices) writes the same bytes as
    `build_batch` over `encode_key`/`encode_value`, tombstones and long offsets deltas too."""
    changes: list[tuple[str, int, OffsetValue | None]] = [
        (f"t{i % 3}", i, None if i % 7 == 0 else OffsetValue(i * 1000, i % 5 - 1, "m" * (i % 4), 9))
        for i in range(300)
    ]
    records = OffsetRecords("g")
    for topic, partition, value in changes:
        records.add(topic, partition, value)
    expected = build_batch(
        [(encode_key(OffsetKey("g", t, p)), None if v is None else encode_value(v))
         for t, p, v in changes],
        timestamp_ms=123,
    )  # fmt: skip
    assert records.batch(123) == expected
    with pytest.raises(ValueError):
        OffsetRecords("g").batch(123)


def test_commits_are_recovered_from_the_log_after_a_restart(tmp_path: Path) -> None:
    logs, store = open_store(tmp_path)
    store.commit("g", {("t", 0): OffsetValue(5, 1, "m", 1000), ("t", 1): OffsetValue(7)})
    store.commit("g", {("t", 0): OffsetValue(9)})
    store.commit("h", {("u", 0): OffsetValue(1)})
    logs.close()

    logs, again = open_store(tmp_path)
    assert again.groups() == {"g", "h"}
    assert again.fetch("g", "t", 0) == OffsetValue(9)
    assert again.fetch("g", "t", 1) == OffsetValue(7)
    assert again.fetch("h", "u", 0) == OffsetValue(1)
    assert again.fetch("h", "u", 1) is None
    assert logs.topics() == []  # the internal log is no topic
    logs.close()


def test_tombstones_delete_groups_offsets_and_topics_for_good(tmp_path: Path) -> None:
    logs, store = open_store(tmp_path)
    store.commit("g", {("t", 0): OffsetValue(1), ("u", 0): OffsetValue(2)})
    store.commit("h", {("t", 0): OffsetValue(3), ("u", 1): OffsetValue(4)})
    store.commit("k", {("t", 5): OffsetValue(6)})
    store.delete_group("g")
    store.delete_topic("t")
    store.delete_offsets("h", [("u", 1), ("never", 0)])
    assert store.groups() == set()
    logs.close()

    logs, again = open_store(tmp_path)
    assert again.groups() == set()
    assert again.fetch("g", "u", 0) is None
    logs.close()


def test_a_torn_tail_after_a_crash_loses_only_the_unfinished_commit(tmp_path: Path) -> None:
    logs, store = open_store(tmp_path)
    store.commit("g", {("t", 0): OffsetValue(1)})
    store.commit("g", {("t", 0): OffsetValue(2)})
    logs.flush_all()
    segment = next((tmp_path / f"{CONSUMER_OFFSETS}-0").glob("*.log"))
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 10])  # the last batch half written, as by kill -9
    # no close: the process died

    logs, again = open_store(tmp_path)
    assert again.fetch("g", "t", 0) == OffsetValue(1)
    again.commit("g", {("t", 0): OffsetValue(3)})  # the log goes on after the cut
    logs.close()
    logs, third = open_store(tmp_path)
    assert third.fetch("g", "t", 0) == OffsetValue(3)
    logs.close()


@pytest.mark.parametrize("damage", ["magic", "crc"])
def test_a_damaged_commit_in_the_log_costs_only_itself(tmp_path: Path, damage: str) -> None:
    """After a clean stop the log is trusted without a scan, so damage inside it is met by the
    recovery read: it used to raise (InvalidRecordBatch, CorruptRecords) and stop the broker
    from starting. The damaged commit is lost (logged and counted by storage); no other is."""
    logs, store = open_store(tmp_path)
    for p in range(200):
        store.commit("g", {("t", p): OffsetValue(p + 1)})
    logs.close()
    segment = next((tmp_path / f"{CONSUMER_OFFSETS}-0").glob("*.log"))
    data = bytearray(segment.read_bytes())
    batches = list(iter_batch_headers(bytes(data)))
    pos, victim = batches[50]
    if damage == "magic":
        data[pos + 16] = 7
    else:
        data[pos + victim.size - 3] ^= 0xFF
    segment.write_bytes(bytes(data))

    logs, again = open_store(tmp_path)
    assert again.fetch("g", "t", 50) is None
    assert [again.fetch("g", "t", p) for p in (0, 49, 51, 199)] == [
        OffsetValue(1), OffsetValue(50), OffsetValue(52), OffsetValue(200),
    ]  # fmt: skip
    logs.close()


def test_the_cleaner_keeps_the_latest_commit_per_key(tmp_path: Path) -> None:
    config = LogConfig(min_cleanable_dirty_ratio=0.0, delete_retention_ms=0)
    logs = LogManager(tmp_path, config)
    log = logs.internal_log(CONSUMER_OFFSETS, {"cleanup.policy": "compact", "segment.bytes": "300"})
    store = OffsetStore(log, now)
    for i in range(40):
        store.commit("g", {("t", i % 2): OffsetValue(i)})
    store.commit("dead", {("t", 0): OffsetValue(1)})
    store.delete_group("dead")
    for i in range(6):  # seal the tombstone's segment
        store.commit("g", {("t", 9): OffsetValue(i)})
    assert isinstance(log, SegmentLog)
    before = len(records(log))
    job = plan_cleaning(log, 10_000, None, 0)
    assert job is not None  # the internal log is compacted and seen by the cleaner
    swap_in(run_cleaning(job))
    kept = records(log)
    assert len(kept) < before
    keys = [decode_key(k) for _, k, _ in kept if k is not None]
    assert len(keys) <= len(set(keys)) + 1  # one per key, but the active segment's
    assert OffsetKey("dead", "t", 0) not in keys
    logs.close()
    logs, again = open_store(tmp_path, config)
    assert again.group_offsets("g") == {
        ("t", 0): OffsetValue(38), ("t", 1): OffsetValue(39), ("t", 9): OffsetValue(5)
    }  # fmt: skip
    assert again.groups() == {"g"}
    logs.close()


@pytest.mark.parametrize("name", [CONSUMER_OFFSETS, "__consumer.offsets"])
def test_no_topic_may_take_the_internal_logs_name(tmp_path: Path, name: str) -> None:
    logs, store = open_store(tmp_path)
    with pytest.raises(InvalidTopic):
        logs.create_topic(name, 1)
    store.commit("g", {("t", 0): OffsetValue(1)})
    logs.close()
    logs = LogManager(tmp_path)
    assert logs.topics() == []  # its directory is not rebuilt as a topic
    logs.close()


class Classic:
    """A coordinator that knows group "live" (generation 3, member "m")."""

    def check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode | None:
        if group_id != "live":
            return None
        if member_id != "m":
            return ErrorCode.unknown_member_id
        return ErrorCode.none if generation_id == 3 else ErrorCode.illegal_generation


class Unknowing:
    def check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode | None:
        return None


def test_validators_decide_for_their_groups_and_simple_commits_pass(tmp_path: Path) -> None:
    logs, store = open_store(tmp_path)
    assert store.check_commit("any", "", -1, None) == ErrorCode.none  # no coordinator at all
    store.validators[:] = [Unknowing(), Classic()]
    assert store.check_commit("simple", "", -1, None) == ErrorCode.none
    assert store.check_commit("live", "m", 3, None) == ErrorCode.none
    assert store.check_commit("live", "m", 2, None) == ErrorCode.illegal_generation
    assert store.check_commit("live", "x", 3, None) == ErrorCode.unknown_member_id
    assert store.check_commit("live", "", -1, None) == ErrorCode.unknown_member_id
    logs.close()


def test_a_commit_the_disk_refuses_changes_nothing(tmp_path: Path, disk: FillingDisk) -> None:
    logs, store = open_store(tmp_path)
    store.commit("g", {("t", 0): OffsetValue(1)})
    disk.full = True
    with pytest.raises(KafkaStorageError):
        store.commit("g", {("t", 0): OffsetValue(2), ("t", 1): OffsetValue(2)})
    with pytest.raises(KafkaStorageError):
        store.delete_group("g")
    assert store.group_offsets("g") == {("t", 0): OffsetValue(1)}  # memory as it was
    disk.full = False
    store.commit("g", {("t", 1): OffsetValue(3)})
    logs.close()
    logs, again = open_store(tmp_path)
    assert again.group_offsets("g") == {("t", 0): OffsetValue(1), ("t", 1): OffsetValue(3)}
    logs.close()
