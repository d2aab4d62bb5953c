"""SharePartitionManager over in-memory logs (`MemoryLogs` through the ShareLogs protocol):
no LogManager, no disk. Fetch returns stored batch bytes with their acquired ranges, the
two-phase acknowledgement, lock expiry, departures, and what the manager counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import structlog
from kio.schema.errors import ErrorCode

from broker.metrics import BrokerMetrics
from broker.share.bookkeeping import offset_ranges
from broker.share.persister import PersistedState
from broker.share.persister import ShareChange
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import build_batch
from storage.memory_log import MemoryLogs

GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AcknowledgeType)
LIMIT_ARCHIVED = "kafka_server_sharegroupmetrics_deliverycountlimitarchivedpersec_total"


class Broker:
    """A manager over one topic "t" of MemoryLogs holding two batches: 0-5 and 6-9."""

    def __init__(self, *, delivery_count_limit: int = 5, durable: bool = False) -> None:
        self.logs = MemoryLogs()
        self.topic = self.logs.create_topic("t", 1)
        plog = self.logs.log("t", 0)
        assert plog is not None
        self.plog = plog
        for count in (6, 4):
            plog.append(build_batch([(None, b"v")] * count, timestamp_ms=1), now_ms=1)
        self.configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        self.configs.alter(
            "G",
            {
                "share.auto.offset.reset": "earliest",
                "share.delivery.count.limit": str(delivery_count_limit),
            },
        )
        self.metrics = BrokerMetrics()
        self.woken: list[tuple[str, int]] = []
        self.persister = Recording(ShareStatePersister(self.logs)) if durable else None
        self.manager = SharePartitionManager(
            self.logs,
            self.configs,
            lambda t, p: self.woken.append((t, p)),
            persister=self.persister,
            metrics=self.metrics,
        )
        self.lock_ms = self.manager.lock_duration_ms("G")

    def fetch(self, member: str, now: int) -> list[tuple[int, int, int]]:
        got = self.manager.fetch(
            "G", member, self.topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=now
        )
        assert got.error_code == ErrorCode.none
        return [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired]

    def ack(self, member: str, batches: Sequence[tuple[int, int, list[int]]], now: int) -> int:
        return self.manager.acknowledge("G", member, self.topic.topic_id, 0, batches, now)

    def partition(self) -> SharePartition:
        sp = self.manager.get("G", self.topic.topic_id, 0, 0)
        assert sp is not None
        return sp

    def counted(self, name: str) -> float:
        value = self.metrics.registry.get_sample_value(name)
        return 0.0 if value is None else value


class Recording:
    """A Persister that hands every call to a real one and notes it (a fake, not a mock)."""

    def __init__(self, inner: ShareStatePersister) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def initialise(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        self.calls.append("initialise")
        self.inner.initialise(key, start_offset, now_ms)

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        return self.inner.read(key, log_start_offset, now_ms)

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
        if change.ranges:
            self.calls.append("write")
        return self.inner.write(key, change, now_ms)

    def delete(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        self.calls.append("delete")
        self.inner.delete(key, start_offset, now_ms)

    def has_state(self, key: SharePartitionKey) -> bool:
        return self.inner.has_state(key)

    def groups(self) -> set[str]:
        return self.inner.groups()

    def recorded(self) -> list[SharePartitionKey]:
        return self.inner.recorded()

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        self.inner.forget_topic(topic, topic_id)


def control_batches(b: Broker) -> int:
    return sum(s.is_control for s in b.plog.batch_spans(0, 1 << 30))


def test_fetch_returns_the_stored_batches_and_their_acquired_ranges() -> None:
    b = Broker()
    got = b.manager.fetch(
        "G", "m", b.topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=0
    )
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got.acquired] == [(0, 9, 1)]
    assert got.records == b.plog.read(0, 1 << 20)  # the stored bytes, unchanged
    assert b.counted("kafka_server_sharegroupmetrics_recordsacquiredpersec_total") == 10
    unknown = b.manager.fetch(
        "G", "m", uuid.uuid4(), 0, max_bytes=1 << 20, max_records=500, now_ms=0
    )
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition


def test_acknowledge_expire_and_depart() -> None:
    b = Broker()
    assert b.fetch("a", 0) == [(0, 9, 1)]
    assert b.ack("b", [(0, 4, [ACCEPT])], 1) == ErrorCode.invalid_record_state  # not b's
    assert b.ack("a", [(0, 4, [ACCEPT])], 1) == ErrorCode.none
    assert b.partition().spso == 5
    assert b.manager.expire_locks(b.lock_ms - 1) == 0
    assert b.manager.expire_locks(b.lock_ms) == 5  # 5-9 come back, and fetchers are woken
    assert b.woken == [("t", 0)]
    assert b.fetch("b", b.lock_ms + 1) == [(5, 9, 2)]
    assert b.manager.release_member("G", "b", b.lock_ms + 2) == 5
    assert b.partition().state_of(7) == (RecordState.AVAILABLE, 2)
    acks = "kafka_server_sharegroupmetrics_recordacknowledgementspersec_total"
    assert b.metrics.registry.get_sample_value(acks, {"ackType": "Accept"}) == 5


def test_a_gap_is_not_counted_as_a_delivery_limit_archival() -> None:
    """GAP and REJECT archive records, and neither is the delivery-count limit at work.
    (Counted as 'archived minus rejected' before, a GAP was a delivery-limit archival.)"""
    b = Broker()
    assert b.fetch("m", 0) == [(0, 9, 1)]
    assert b.ack("m", [(0, 2, [GAP]), (3, 3, [REJECT]), (4, 9, [ACCEPT])], 1) == ErrorCode.none
    assert b.partition().spso == 10
    assert b.counted(LIMIT_ARCHIVED) == 0


def test_releases_at_the_delivery_count_limit_are_counted() -> None:
    b = Broker(delivery_count_limit=2)
    assert b.fetch("m", 0) == [(0, 9, 1)]
    assert b.ack("m", [(0, 9, [RELEASE])], 1) == ErrorCode.none
    assert b.fetch("m", 2) == [(0, 9, 2)]
    assert b.ack("m", [(0, 1, [GAP]), (2, 5, [RELEASE])], 3) == ErrorCode.none
    assert b.counted(LIMIT_ARCHIVED) == 4  # 2-5; not the GAP at 0-1
    assert b.manager.expire_locks(2 + b.lock_ms) == 4  # 6-9, at their limit too
    assert b.counted(LIMIT_ARCHIVED) == 8
    assert b.partition().spso == 10


def test_records_given_up_at_the_limit_are_logged_by_offset_and_counted_by_group() -> None:
    """Issue 30: each give-up leaves one line naming the group, the topic, the partition and
    the offsets, and a counter by group and topic (never by offset)."""
    b = Broker(delivery_count_limit=2)
    assert b.fetch("m", 0) == [(0, 9, 1)]
    assert b.ack("m", [(0, 9, [RELEASE])], 1) == ErrorCode.none
    assert b.fetch("m", 2) == [(0, 9, 2)]
    with structlog.testing.capture_logs() as logs:
        batches = [(0, 1, [ACCEPT]), (2, 3, [RELEASE]), (4, 4, [ACCEPT]), (5, 5, [RELEASE])]
        assert b.ack("m", batches, 3) == ErrorCode.none
        b.manager.expire_locks(2 + b.lock_ms)  # 6-9: their locks expire at the limit
    lines = [r for r in logs if r["event"] == "records archived at the delivery-count limit"]
    assert [(r["offsets"], r["records"], r["first_offset"], r["last_offset"]) for r in lines] == [
        ("2-3,5", 3, 2, 5),
        ("6-9", 4, 6, 9),
    ]
    assert all((r["group"], r["topic"], r["partition"]) == ("G", "t", 0) for r in lines)
    assert all(r["log_level"] == "warning" and r["dead_letter"] is False for r in lines)
    by_group = b.metrics.registry.get_sample_value(
        "shoal_sharegroup_delivery_limit_archived_records_total", {"group": "G", "topic": "t"}
    )
    assert by_group == 7


def test_offset_ranges_in_a_log_line_are_capped() -> None:
    assert offset_ranges([(1, 1), (3, 7)]) == "1,3-7"
    assert offset_ranges([(i, i) for i in range(0, 10, 2)], cap=2) == "0,2,... 3 more ranges"


def test_every_share_state_record_is_written_through_the_persister() -> None:
    """The broker's changes and the admin's reset and delete: each control batch in the log is
    one Persister call, none written around it."""
    b = Broker(durable=True)
    assert b.persister is not None
    assert b.fetch("m", 0) == [(0, 9, 1)]  # a new share-partition: its first checkpoint
    assert b.ack("m", [(0, 4, [ACCEPT])], 1) == ErrorCode.none
    b.manager.release_member("G", "m", 2)
    offsets = ShareGroupOffsets(b.manager, b.logs, lambda: 3)
    assert offsets.reset("G", b.topic, 0, 8) == ErrorCode.none
    assert b.partition().spso == 8
    offsets.delete("G", b.topic, 0)
    assert b.persister.calls == ["initialise", "write", "write", "initialise", "delete"]
    assert control_batches(b) == len(b.persister.calls)

    # The tombstone: the group starts again from share.auto.offset.reset (earliest).
    assert b.fetch("m", 4) == [(0, 9, 1)]


def test_durable_state_survives_a_new_manager_over_the_same_logs() -> None:
    b = Broker(durable=True)
    assert b.fetch("m", 0) == [(0, 9, 1)]
    assert b.ack("m", [(0, 5, [ACCEPT]), (6, 9, [RELEASE])], 1) == ErrorCode.none
    restarted = SharePartitionManager(b.logs, b.configs, persister=ShareStatePersister(b.logs))
    sp = restarted.get("G", b.topic.topic_id, 0, 2)
    assert sp is not None and (sp.spso, sp.speo) == (6, 10)
    assert sp.state_of(6) == (RecordState.AVAILABLE, 1)


def test_an_acknowledgement_never_brings_back_deleted_offsets() -> None:
    """A member's closing acknowledgement that lands after DeleteShareGroupOffsets answers as
    for records it does not hold, and writes nothing: the group's offsets stay deleted."""
    b = Broker(durable=True)
    assert b.persister is not None
    assert b.fetch("m", 0) == [(0, 9, 1)]
    b.manager.release_member("G", "m", 1)
    ShareGroupOffsets(b.manager, b.logs, lambda: 2).delete("G", b.topic, 0)
    written = control_batches(b)
    assert b.ack("m", [(0, 4, [ACCEPT])], 3) == ErrorCode.invalid_record_state
    assert b.ack("m", [(5, 5, [GAP])], 3) == ErrorCode.none
    assert b.ack("m", [(4, 2, [ACCEPT])], 3) == ErrorCode.invalid_request
    assert b.manager.partitions_of("G") == []
    assert control_batches(b) == written


def test_an_acknowledgement_that_makes_room_in_a_full_window_wakes_fetchers() -> None:
    logs = MemoryLogs()
    topic = logs.create_topic("t", 1)
    plog = logs.log("t", 0)
    assert plog is not None
    for _ in range(3):
        plog.append(build_batch([(None, b"v")] * 50, timestamp_ms=1), now_ms=1)
    configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
    configs.alter(
        "G", {"share.auto.offset.reset": "earliest", "share.partition.max.record.locks": "100"}
    )
    woken: list[tuple[str, int]] = []
    manager = SharePartitionManager(logs, configs, lambda t, p: woken.append((t, p)))

    def fetch(member: str) -> list[tuple[int, int]]:
        got = manager.fetch(
            "G", member, topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=0
        )
        return [(a.first_offset, a.last_offset) for a in got.acquired]

    assert fetch("A") == [(0, 99)]  # the window is full: 100 record locks
    assert fetch("B") == []  # B would now wait
    assert manager.acknowledge("G", "A", topic.topic_id, 0, [(0, 49, [ACCEPT])], 1) == 0
    assert woken == [("t", 0)]  # room again, over records 100-149 already in the log
    assert fetch("B") == [(100, 149)]


def test_an_acknowledgement_with_room_in_the_window_wakes_nobody() -> None:
    """Records past SPEO were offered to every waiter when they were appended; with room in
    the window (and no key ordering) nothing an acknowledgement does lets a waiter take more,
    so it is not woken to read the log for nothing (at a fixed rate: one wake-up per
    waiting consumer per record)."""
    b = Broker()
    assert b.fetch("A", 0) == [(0, 9, 1)]
    b.plog.append(build_batch([(None, b"v")], timestamp_ms=1), now_ms=1)  # 10: B's to take
    assert b.ack("A", [(0, 9, [ACCEPT])], 1) == ErrorCode.none
    sp = b.partition()
    assert (sp.spso, sp.next_fetch_offset(), b.plog.log_end_offset) == (10, 10, 11)
    assert b.woken == []
    assert b.fetch("B", 2) == [(10, 10, 1)]


def test_a_consumer_at_the_log_end_does_not_read_its_own_acknowledgement_record() -> None:
    """The control batch an acknowledgement is written as lies where the next fetch would
    read: it is stepped over at once, so the fetch after the acknowledgement reads nothing
    and wakes nobody, and a restart (which reads and archives it) comes to the same place."""
    b = Broker(durable=True)
    assert b.fetch("m", 0) == [(0, 9, 1)]  # offset 10: the first checkpoint
    assert b.ack("m", [(0, 9, [ACCEPT])], 1) == ErrorCode.none  # offset 11: the next one
    sp = b.partition()
    assert (sp.spso, sp.speo, b.plog.log_end_offset) == (12, 12, 12)
    assert sp.next_fetch_offset() == b.plog.log_end_offset  # nothing left to read
    assert b.woken == []

    restarted = SharePartitionManager(b.logs, b.configs, persister=ShareStatePersister(b.logs))
    b.plog.append(build_batch([(None, b"v")], timestamp_ms=1), now_ms=2)  # offset 12
    for manager in (b.manager, restarted):
        got = manager.fetch(
            "G", "n", b.topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=3
        )
        assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(12, 12)]


def test_a_record_written_behind_other_data_is_left_to_the_read() -> None:
    """Records produced after the acquired ones lie before the acknowledgement's control
    batch: nothing is stepped over, they are read and delivered as usual."""
    b = Broker(durable=True)
    assert b.fetch("m", 0) == [(0, 9, 1)]
    b.plog.append(build_batch([(None, b"v")] * 2, timestamp_ms=1), now_ms=1)  # 11-12
    assert b.ack("m", [(0, 9, [ACCEPT])], 2) == ErrorCode.none  # its record at 13
    sp = b.partition()
    assert (sp.spso, sp.speo) == (11, 11)
    assert b.fetch("m", 3) == [(11, 12, 1)]


def test_per_fetch_group_reads_follow_group_and_broker_config_changes() -> None:
    """The lock duration (ShareFetch's AcquisitionLockTimeoutMs) and key ordering a fetch reads
    by group are cached (`GroupLimits`): a group config change and a dynamic broker default
    change (`GroupConfigs.broker_changed`) each show at the next read."""
    broker = {name: value for name, (value, _) in BROKER_DEFAULTS.items()}
    configs = GroupConfigs(None, lambda name: broker[name])
    manager = SharePartitionManager(MemoryLogs(), configs)
    assert (manager.lock_duration_ms("G"), manager.key_ordered("G")) == (30_000, False)
    configs.alter("G", {"share.record.lock.duration.ms": "20000"})
    configs.alter("G", {"share.key.ordering.enable": "true"})
    assert (manager.lock_duration_ms("G"), manager.key_ordered("G")) == (20_000, True)
    assert (manager.lock_duration_ms("H"), manager.key_ordered("H")) == (30_000, False)
    broker["group.share.record.lock.duration.ms"] = 45_000
    configs.broker_changed()
    assert manager.lock_duration_ms("H") == 45_000
    assert manager.lock_duration_ms("G") == 20_000  # the group's own value still wins
