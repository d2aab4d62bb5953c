"""LogManager: topics, partitions and their logs, on disk and in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog

from protocol.record_batch import build_batch
from storage import InvalidConfig
from storage import InvalidPartitions
from storage import InvalidTopic
from storage import LogConfig
from storage import LogManager
from storage import MemoryLog
from storage import SegmentLog
from storage import TopicAlreadyExists
from storage import UnknownTopicOrPartition

TS = 1_700_000_000_000


@pytest.fixture(params=["disk", "memory"])
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> LogManager:
    if request.param == "memory":
        return LogManager(None, memory=True)
    return LogManager(tmp_path)


def test_create_topic_and_logs(manager: LogManager) -> None:
    info = manager.create_topic("orders", 3, {"segment.bytes": "1000"})
    assert (info.name, info.partitions, info.configs) == ("orders", 3, {"segment.bytes": "1000"})
    assert manager.topic("orders") == info
    assert manager.topic_by_id(info.topic_id) == info
    assert manager.topics() == [info]
    expected = MemoryLog if manager.memory else SegmentLog
    for p in range(3):
        log = manager.log("orders", p)
        assert isinstance(log, expected)
        assert log.config.segment_bytes == 1000
    assert manager.log("orders", 3) is None
    assert manager.log("nope", 0) is None


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/y", "ünï", "a:b"])
def test_invalid_topic_names(manager: LogManager, name: str) -> None:
    with pytest.raises(InvalidTopic) as info:
        manager.create_topic(name, 1)
    assert info.value.error_code.name == "invalid_topic_exception"


def test_topic_errors(manager: LogManager) -> None:
    manager.create_topic("a.b", 1)
    manager.create_topic("a" * 249, 1)
    with pytest.raises(TopicAlreadyExists):
        manager.create_topic("a.b", 1)
    with pytest.raises(InvalidTopic):
        manager.create_topic("a_b", 1)  # collides with a.b in metric names
    with pytest.raises(InvalidPartitions):
        manager.create_topic("zero", 0)
    with pytest.raises(InvalidConfig):
        manager.create_topic("badcfg", 1, {"retention.ms": "soon"})
    assert manager.topic("badcfg") is None
    with pytest.raises(UnknownTopicOrPartition):
        manager.delete_topic("missing")
    with pytest.raises(InvalidPartitions):
        manager.create_partitions("a.b", 1)
    with pytest.raises(UnknownTopicOrPartition):
        manager.create_partitions("missing", 3)


def test_create_partitions_and_delete(manager: LogManager) -> None:
    info = manager.create_topic("t", 1)
    manager.log("t", 0).append(build_batch([(b"k", b"v")], timestamp_ms=TS), now_ms=TS)  # type: ignore[union-attr]
    grown = manager.create_partitions("t", 3)
    assert grown.partitions == 3 and grown.topic_id == info.topic_id
    assert manager.log("t", 2) is not None
    assert manager.log("t", 0).log_end_offset == 1  # type: ignore[union-attr]
    manager.delete_topic("t")
    assert manager.topic("t") is None and manager.topic_by_id(info.topic_id) is None
    assert manager.log("t", 0) is None
    again = manager.create_topic("t", 1)
    assert again.topic_id != info.topic_id
    assert manager.log("t", 0).log_end_offset == 0  # type: ignore[union-attr]


def test_metadata_and_data_survive_restart(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=10_000))
    info = manager.create_topic("events", 2, {"retention.ms": "-1"})
    manager.create_partitions("events", 4)
    log = manager.log("events", 3)
    assert log is not None
    log.append(build_batch([(b"k", b"v")] * 3, timestamp_ms=TS), now_ms=TS)
    manager.flush_all()
    manager.close()
    doc = json.loads((tmp_path / "__topics" / f"{info.topic_id}.json").read_text())
    assert doc["topic_id"] == str(info.topic_id)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".kafka_cleanshutdown",
        "__topics",
        "events-0",
        "events-1",
        "events-2",
        "events-3",
        "recovery-point-offset-checkpoint",
    ]
    manager = LogManager(tmp_path, LogConfig(segment_bytes=10_000))
    (reloaded,) = manager.topics()
    assert (reloaded.topic_id, reloaded.partitions) == (info.topic_id, 4)
    assert reloaded.configs == {"retention.ms": "-1"}
    log = manager.log("events", 3)
    assert log is not None and log.log_end_offset == 3
    manager.delete_topic("events")
    assert not (tmp_path / "events-0").exists()
    assert LogManager(tmp_path).topics() == []


def test_apply_retention_across_partitions(manager: LogManager) -> None:
    one = build_batch([(b"k", b"v")], timestamp_ms=TS)
    manager.create_topic("r", 2, {"segment.bytes": str(len(one)), "retention.bytes": "0"})
    for p in range(2):
        log = manager.log("r", p)
        assert log is not None
        for _ in range(4):
            log.append(one, now_ms=TS)
    assert manager.apply_retention(TS, {("r", 1): 1}) == 3 + 1
    assert manager.log("r", 0).log_start_offset == 3  # type: ignore[union-attr]
    assert manager.log("r", 1).log_start_offset == 1  # type: ignore[union-attr]


def test_each_segment_retention_deletes_is_logged_with_its_offsets(tmp_path: Path) -> None:
    """One line per deleted segment: topic, partition, file, offsets and the limit broken,
    as Kafka's UnifiedLog logs "Deleting segment ... due to log retention time/size"."""
    manager = LogManager(tmp_path)
    one = build_batch([(b"k", b"v")] * 2, timestamp_ms=TS)
    manager.create_topic("old", 1, {"segment.bytes": str(len(one)), "retention.ms": "1000"})
    manager.create_topic("big", 1, {"segment.bytes": str(len(one)), "retention.bytes": "0"})
    for name in ("old", "big"):
        log = manager.log(name, 0)
        assert log is not None
        for _ in range(3):
            log.append(one, now_ms=TS)
    with structlog.testing.capture_logs() as logs:
        assert manager.apply_retention(TS + 5000) == 2 + 2
    deleted = [e for e in logs if e["event"] == "segment deleted"]
    seen = {(e["topic"], e["partition"], e["base_offset"], e["last_offset"], e["reason"])
            for e in deleted}  # fmt: skip
    assert seen == {
        ("old", 0, 0, 1, "retention.ms"), ("old", 0, 2, 3, "retention.ms"),
        ("big", 0, 0, 1, "retention.bytes"), ("big", 0, 2, 3, "retention.bytes"),
    }  # fmt: skip
    assert all(e["segment"].endswith(".log") and e["log_level"] == "info" for e in deleted)
