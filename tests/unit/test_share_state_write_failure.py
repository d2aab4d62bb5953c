"""Share state is written before it changes in memory (two-phase, as Kafka's share code).

The partition log's writes fail at the system call (a full disk). An acknowledgement whose
SHARE_DELTA cannot be written answers KAFKA_STORAGE_ERROR and has not happened: the records stay
acquired by the member, SPSO stays, and the same acknowledgement succeeds once the disk has room.
Lock expiry waits for the disk the same way. A restart recovers exactly what was confirmed.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.metrics import BrokerMetrics
from broker.share.record_state import RecordState
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import build_batch
from storage import segment as segment_module
from storage.log_manager import LogManager

ACCEPT = 1


class Disk:
    def __init__(self) -> None:
        self.full = False
        self._real = os.write

    def write(self, fd: int, data: memoryview | bytes) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._real(fd, data)


def open_broker(
    data: Path, metrics: BrokerMetrics | None = None
) -> tuple[LogManager, SharePartitionManager]:
    logs = LogManager(data)
    configs = GroupConfigs(data / "group-configs.json", lambda name: BROKER_DEFAULTS[name][0])
    configs.alter("G", {"share.auto.offset.reset": "earliest"})
    persister = ShareStatePersister(logs, data / "__share_state")
    return logs, SharePartitionManager(
        logs, configs, persister=persister, metrics=metrics or BrokerMetrics()
    )


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    fake = Disk()
    monkeypatch.setattr(segment_module.os, "write", fake.write)
    return fake


def setup(
    tmp_path: Path, metrics: BrokerMetrics | None = None
) -> tuple[LogManager, SharePartitionManager, uuid.UUID]:
    logs, m = open_broker(tmp_path, metrics)
    tid = logs.create_topic("t", 1, {}).topic_id
    plog = logs.log("t", 0)
    assert plog is not None
    plog.append(build_batch([(None, b"x")] * 10, timestamp_ms=1), now_ms=1)  # 0-9
    got = m.fetch("G", "m", tid, 0, max_bytes=1 << 20, max_records=500, now_ms=10)
    assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(0, 9)]
    return logs, m, tid


def test_a_failed_write_leaves_the_acknowledgement_undone(tmp_path: Path, disk: Disk) -> None:
    metrics = BrokerMetrics()
    logs, m, tid = setup(tmp_path, metrics)
    disk.full = True
    code = m.acknowledge("G", "m", tid, 0, [(0, 4, [ACCEPT])], 20)
    assert code == ErrorCode.kafka_storage_error
    sp = m.get("G", tid, 0, 20)
    assert sp is not None
    assert sp.spso == 0  # not moved past records whose acceptance is not on disk
    held = [b for b in sp.in_flight() if b.state is RecordState.ACQUIRED and b.member_id == "m"]
    assert [(b.first, b.last) for b in held] == [(0, 9)]  # still the member's, as before
    assert metrics.share_state_write_failures._value.get() == 1

    disk.full = False
    assert m.acknowledge("G", "m", tid, 0, [(0, 4, [ACCEPT])], 30) == ErrorCode.none
    assert sp.spso == 5
    del logs, m  # crash: nothing closed

    _, restarted = open_broker(tmp_path)
    recovered = restarted.get("G", tid, 0, 40)
    assert recovered is not None and recovered.spso == 5


def test_lock_expiry_waits_for_the_disk(tmp_path: Path, disk: Disk) -> None:
    logs, m, tid = setup(tmp_path)
    lock = m.lock_duration_ms("G")
    disk.full = True
    assert m.expire_locks(10 + lock) == 0  # the release could not be written: still acquired
    sp = m.get("G", tid, 0, 10 + lock)
    assert sp is not None and sp.acquired_count() == 10
    disk.full = False
    later = 10 + lock + 1000  # tried again a second later
    assert m.expire_locks(later) == 10
    assert sp.acquired_count() == 0
    del logs, m

    _, restarted = open_broker(tmp_path)
    recovered = restarted.get("G", tid, 0, later)
    assert recovered is not None
    assert recovered.state_of(0) == (RecordState.AVAILABLE, 1)  # the expiry was recorded
