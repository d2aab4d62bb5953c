"""Partition limits, all-or-nothing creates and bounded file handles (issue 9, hostile sizes)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from protocol.record_batch import build_batch
from storage import InvalidPartitions
from storage import LogManager
from storage import log_manager as log_manager_module
from storage import segment as segment_module
from storage.errors import KafkaStorageError
from storage.file_handles import FileHandles

TS = 1_700_000_000_000


def test_the_broker_total_is_checked_before_anything_is_made(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, max_partitions=10)
    logs.create_topic("a", 6)
    with pytest.raises(InvalidPartitions, match=r"max\.broker\.partitions"):
        logs.create_topic("b", 5)
    with pytest.raises(InvalidPartitions, match=r"max\.broker\.partitions"):
        logs.create_partitions("a", 11)
    assert not list(tmp_path.glob("b-*")) and not list(tmp_path.glob("a-6"))
    logs.create_partitions("a", 10)


def test_a_create_that_fails_part_way_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs = LogManager(tmp_path)
    real = log_manager_module.write_partition_metadata
    calls = []

    def failing(directory: Path, topic_id: object) -> None:
        calls.append(directory)
        if len(calls) == 3:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        real(directory, topic_id)  # type: ignore[arg-type]

    monkeypatch.setattr(log_manager_module, "write_partition_metadata", failing)
    with pytest.raises(KafkaStorageError):
        logs.create_topic("half", 5)
    assert logs.topic("half") is None
    assert not list(tmp_path.glob("half-*"))
    assert not list((tmp_path / "__topics").glob("*.json"))
    monkeypatch.setattr(log_manager_module, "write_partition_metadata", real)
    logs.create_topic("half", 5)  # and it can be made afterwards


def test_file_handles_stay_bounded_across_many_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handles = FileHandles(capacity=8)
    monkeypatch.setattr(segment_module, "HANDLES", handles)
    logs = LogManager(tmp_path)
    logs.create_topic("many", 50)
    for round_ in range(2):
        for p in range(50):
            plog = logs.log("many", p)
            assert plog is not None
            plog.append(build_batch([(None, b"%d-%d" % (p, round_))], timestamp_ms=TS), now_ms=TS)
            assert len(handles) <= 8
    logs.flush_all()  # syncs reopen what they need
    for p in range(50):
        plog = logs.log("many", p)
        assert plog is not None and plog.log_end_offset == 2
        assert len(plog.read(0, 1 << 20)) > 0
    logs.close()
    reopened = LogManager(tmp_path)
    plog = reopened.log("many", 49)
    assert plog is not None and plog.log_end_offset == 2
