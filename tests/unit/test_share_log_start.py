"""Share-partitions when DeleteRecords moves the log start past SPSO (KIP-932).

Records still open below the new start are archived (acquired ones too: their member's
acknowledgement then fails), SPSO moves up to it, and the window is written as a new
checkpoint at the log end before it is applied: plan, write, apply. Over a MemoryLog and a
real ShareStatePersister (a fake log, a real persister), and a failing persister for the order.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.share.persister import PersistedState
from broker.share.persister import ShareChange
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from broker.share.window import AcquiredRecords
from broker.share.window import StateRange
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import build_batch
from storage.config import LogConfig
from storage.errors import KafkaStorageError
from storage.memory_log import MemoryLog
from storage.memory_log import MemoryLogs
from tests.unit.test_share_partition import setup
from tests.unit.test_share_partition import states
from tests.unit.test_share_partition_support import fetch

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED
ACCEPT, RELEASE = int(AcknowledgeType.ACCEPT), int(AcknowledgeType.RELEASE)


# ---------------------------------------------------------------------- SharePartition


def test_records_below_the_new_start_are_archived_and_spso_moves() -> None:
    sp, log, _ = setup(10, 10, 10)
    assert fetch(sp, log, "a", now=0, max_records=10) == [AcquiredRecords(0, 9, 1)]
    assert fetch(sp, log, "b", now=0, max_records=10) == [AcquiredRecords(10, 19, 1)]
    assert sp.acknowledge("a", [(0, 4, [ACCEPT]), (5, 9, [RELEASE])], now_ms=1) == 0
    before = (sp.spso, sp.speo, sp.in_flight())

    plan = sp.plan_log_start(15)
    assert (sp.spso, sp.speo, sp.in_flight()) == before  # planning changes nothing
    assert (plan.start_offset, plan.end_offset, plan.archived) == (15, 20, 10)  # 5-9, 10-14
    assert plan.ranges == (StateRange(15, 19, AVAILABLE, 0),)  # ACQUIRED is stored so

    sp.apply_log_start(plan)
    assert (sp.spso, sp.speo) == (15, 20)
    assert states(sp, 15, 19) == [(ACQUIRED, 1)] * 5
    assert sp.acquired_count() == 5
    # b's records below the start are no longer held: its acknowledgement fails whole.
    assert sp.acknowledge("b", [(10, 19, [ACCEPT])], now_ms=2) == ErrorCode.invalid_record_state
    assert sp.acknowledge("b", [(15, 19, [ACCEPT])], now_ms=2) == ErrorCode.none
    assert (sp.spso, sp.speo) == (20, 20)


def test_a_start_past_the_window_empties_it_and_starts_there() -> None:
    sp, log, _ = setup(10, 10)
    fetch(sp, log, "a", now=0, max_records=10)
    plan = sp.plan_log_start(18)
    assert (plan.start_offset, plan.end_offset, plan.ranges, plan.archived) == (18, 18, (), 10)
    sp.apply_log_start(plan)
    assert (sp.spso, sp.speo, sp.acquired_count(), sp.next_deadline()) == (18, 18, 0, None)
    assert sp.next_fetch_offset() == 18


def test_spso_moves_on_over_terminal_records_at_the_new_start() -> None:
    sp, log, _ = setup(10)
    fetch(sp, log, "a", now=0)
    assert sp.acknowledge("a", [(4, 6, [ACCEPT])], now_ms=1) == ErrorCode.none
    plan = sp.plan_log_start(4)
    assert (plan.start_offset, plan.archived) == (7, 4)
    sp.apply_log_start(plan)
    assert sp.spso == 7


def test_a_start_at_or_below_spso_changes_nothing() -> None:
    sp, log, _ = setup(10)
    fetch(sp, log, "a", now=0)
    assert sp.acknowledge("a", [(0, 4, [ACCEPT])], now_ms=1) == ErrorCode.none
    plan = sp.plan_log_start(3)
    assert (plan.start_offset, plan.end_offset, plan.archived) == (5, 10, 0)
    sp.apply_log_start(plan)
    assert (sp.spso, sp.speo, sp.acquired_count()) == (5, 10, 5)


# ------------------------------------------------------------------ the manager, durable


class Broker:
    """A manager over topic "t" (one MemoryLog, a segment per batch) with durable state and
    snapshot files in `state_dir`; `restart()` makes a new manager over the same log. Group G
    starts at the earliest offset, H at the latest."""

    def __init__(self, state_dir: Path, batches: int = 3) -> None:
        self.logs = MemoryLogs()
        self.plog = MemoryLog(LogConfig(segment_bytes=200))
        self.topic = self.logs.create_topic("t", logs=[self.plog])
        self.produce(batches)
        self.configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        self.configs.alter("G", {"share.auto.offset.reset": "earliest"})
        self.configs.alter("H", {"share.auto.offset.reset": "latest"})
        self.state_dir = state_dir
        self.persister = Ordered(ShareStatePersister(self.logs, state_dir))
        self.manager = SharePartitionManager(self.logs, self.configs, persister=self.persister)

    def produce(self, batches: int) -> None:
        for _ in range(batches):
            self.plog.append(build_batch([(None, b"v")] * 10, timestamp_ms=1), now_ms=1)

    def restart(self) -> SharePartitionManager:
        self.persister.inner.flush_snapshots()
        self.persister = Ordered(ShareStatePersister(self.logs, self.state_dir))
        self.manager = SharePartitionManager(self.logs, self.configs, persister=self.persister)
        return self.manager

    def fetch(self, group: str, member: str, now: int) -> list[tuple[int, int, int]]:
        got = self.manager.fetch(
            group, member, self.topic.topic_id, 0, max_bytes=1 << 20, max_records=10, now_ms=now
        )
        return [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired]

    def ack(self, group: str, member: str, first: int, last: int, ack: int, now: int) -> int:
        return self.manager.acknowledge(
            group, member, self.topic.topic_id, 0, [(first, last, [ack])], now
        )

    def partition(self, group: str) -> SharePartition:
        sp = self.manager.get(group, self.topic.topic_id, 0, 0)
        assert sp is not None
        return sp

    def move_log_start(self, offset: int, now: int) -> int:
        """What DeleteRecords does: share-partitions first, then the log start."""
        archived = self.manager.move_log_start(self.topic.topic_id, 0, offset, now)
        self.persister.inner.flush_snapshots()
        eso = self.persister.inner.earliest_share_offset("t", 0)
        self.plog.save_log_start(offset)
        self.plog.advance_log_start(offset, eso)
        return archived


class Ordered:
    """A Persister that notes, for each checkpoint, the SPSO in memory when it was written
    (a fake around the real one); `full` makes checkpoints fail as a full disk does."""

    def __init__(self, inner: ShareStatePersister) -> None:
        self.inner = inner
        self.manager: SharePartitionManager | None = None
        self.seen: list[tuple[str, int, int]] = []  # (group, SPSO in memory, SPSO written)
        self.full = False

    def initialise(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        self.inner.initialise(key, start_offset, now_ms)

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        return self.inner.read(key, log_start_offset, now_ms)

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
        return self.inner.write(key, change, now_ms)

    def checkpoint(
        self,
        key: SharePartitionKey,
        start_offset: int,
        end_offset: int,
        ranges: Sequence[StateRange],
        now_ms: int,
    ) -> None:
        if self.full:
            raise KafkaStorageError(os.strerror(errno.ENOSPC))
        sp = self.manager.get(*key, now_ms) if self.manager else None
        self.seen.append((key[0], sp.spso if sp else -1, start_offset))
        self.inner.checkpoint(key, start_offset, end_offset, ranges, now_ms)

    def delete(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        self.inner.delete(key, start_offset, now_ms)

    def has_state(self, key: SharePartitionKey) -> bool:
        return self.inner.has_state(key)

    def groups(self) -> set[str]:
        return self.inner.groups()

    def recorded(self) -> list[SharePartitionKey]:
        return self.inner.recorded()

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        self.inner.forget_topic(topic, topic_id)


def test_the_checkpoint_is_written_before_memory_moves(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    b.persister.manager = b.manager
    assert b.fetch("G", "a", 0) == [(0, 9, 1)]
    assert b.move_log_start(5, 1) == 5
    assert b.persister.seen == [("G", 0, 5)]  # written while memory still had SPSO 0
    assert b.partition("G").spso == 5


def test_a_failed_checkpoint_changes_nothing(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    assert b.fetch("G", "a", 0) == [(0, 9, 1)]
    b.persister.full = True
    with pytest.raises(KafkaStorageError):
        b.manager.move_log_start(b.topic.topic_id, 0, 5, 1)
    sp = b.partition("G")
    assert (sp.spso, sp.acquired_count()) == (0, 10)
    assert b.ack("G", "a", 0, 9, ACCEPT, 2) == ErrorCode.none


def test_loaded_share_partitions_archive_below_the_start_durably(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    assert b.fetch("G", "g", 0) == [(0, 9, 1)]
    assert b.ack("G", "g", 0, 2, ACCEPT, 1) == ErrorCode.none
    assert b.fetch("G", "g", 2) == [(10, 19, 1)]
    assert b.ack("G", "g", 12, 14, ACCEPT, 3) == ErrorCode.none
    assert b.move_log_start(11, 4) == 7 + 1  # 3-9 and 10; 12-14 were ACCEPTed already
    assert b.plog.segments[0].base_offset == 10  # 0-9 deleted
    assert b.ack("G", "g", 10, 10, ACCEPT, 5) == ErrorCode.invalid_record_state
    b.restart()
    g = b.partition("G")
    assert g.spso == 11
    # 11 was acquired, not delivered: recorded so (count 0), it is delivered again as a first.
    assert states(g, 11, 14) == [(AVAILABLE, 0)] + [(ACKNOWLEDGED, 1)] * 3
    assert b.fetch("G", "g", 6) == [(11, 11, 1), (15, 19, 1)]  # never 12-14 again


def test_an_unloaded_share_partition_keeps_its_place(tmp_path: Path) -> None:
    """H has durable state only (no member since the restart), recorded below the new start.
    It is recovered and checkpointed above it first; otherwise its records would be found
    nowhere and H would start again at the log end, skipping 17-31."""
    b = Broker(tmp_path, batches=1)
    assert b.fetch("H", "h", 0) == []  # latest: SPSO 10, its first checkpoint at 10
    b.produce(2)  # 11-20, 21-30
    assert b.fetch("H", "h", 1) == [(11, 20, 1)]
    assert b.ack("H", "h", 11, 20, ACCEPT, 2) == ErrorCode.none  # the window empties: SCO 31
    b.produce(2)  # 32-41, 42-51
    b.restart()
    sco = b.persister.inner.earliest_share_offset("t", 0)
    assert sco == 31

    assert b.move_log_start(37, 3) == 0
    eso = b.persister.inner.earliest_share_offset("t", 0)
    assert eso is not None and eso >= 37
    assert b.plog.segments[0].base_offset == 32  # everything below the batch holding 37: gone

    b.restart()
    assert b.partition("H").spso == 37
    assert b.fetch("H", "h", 4) == [(37, 41, 1)]
