"""KIP-1191 in the share-partition manager, over in-memory logs: records a group gives up on
are copied to its dead-letter topic with their context headers, and only then archived.

The crash tests stop the copier between the copy and the SHARE_DELTA that archives, then
open a new manager over the same logs (a restart): the records are still ARCHIVING and are
copied again. Duplicates in the dead-letter topic are allowed; losses are not.
"""

from __future__ import annotations

import pytest

from broker.metrics import BrokerMetrics
from broker.share.dead_letter_duty import DeadLetterCopier
from broker.share.persister import PersistedState
from broker.share.persister import ShareChange
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_group_offsets import ShareGroupOffsets
from broker.share.share_partition import SharePartitionKey
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import DLQ_COPY_RECORD
from coordinator.group_configs import DLQ_TOPIC
from coordinator.group_configs import GroupConfigs
from protocol.dead_letter import DELIVERY_LIMIT
from protocol.dead_letter import REJECTED
from protocol.dead_letter import key_and_value
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.record_batch import read_varint
from protocol.records import decode_records
from storage.config import DLQ_GROUP_ENABLE
from storage.config import LogConfig
from storage.errors import KafkaStorageError
from storage.log import AppendResult
from storage.memory_log import MemoryLog
from storage.memory_log import MemoryLogs

ACCEPT, RELEASE, REJECT = (int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                             AcknowledgeType.REJECT))  # fmt: skip
ARCHIVING, ARCHIVED = RecordState.ARCHIVING, RecordState.ARCHIVED
COPIED = ("kafka_server_sharegroupmetrics_deadletterrecordspersec_total", {"result": "copied"})
NOT_COPIED = (COPIED[0], {"result": "not_copied"})


class Crash(Exception):
    """The process dies here (kill -9): nothing after this point happens."""


class CrashBeforeArchive:
    """A real persister that dies, when armed, on the write that archives dead letters."""

    def __init__(self, inner: ShareStatePersister) -> None:
        self.inner = inner
        self.armed = False
        self.disk_full = False

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
        if self.armed and any(c.state is ARCHIVED for c in change.ranges):
            raise Crash
        if self.disk_full and any(c.state is ARCHIVED for c in change.ranges):
            raise KafkaStorageError("No space left on device")
        return self.inner.write(key, change, now_ms)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        return self.inner.read(key, log_start_offset, now_ms)


class Broker:
    """Topic "t" (10 records, keys k0..k9) read by group "G", with a dead-letter topic."""

    def __init__(
        self,
        *,
        dlq: str | None = "dlq.t",
        dlq_configs: dict[str, str] | None = None,
        dlq_partitions: int = 1,
        source_partitions: int = 1,
        limit: int = 5,
        logs: MemoryLogs | None = None,
    ) -> None:
        self.logs = logs or MemoryLogs()
        if logs is None:
            self.topic = self.logs.create_topic("t", source_partitions)
            for p in range(source_partitions):
                plog = self.logs.log("t", p)
                assert plog is not None
                records = [NewRecord(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
                plog.append(build_batch(records, timestamp_ms=1), now_ms=1)
            if dlq is not None:
                self.logs.create_topic(
                    dlq,
                    dlq_partitions,
                    configs={DLQ_GROUP_ENABLE: "true"} if dlq_configs is None else dlq_configs,
                )
        else:
            topic = self.logs.topic("t")
            assert topic is not None
            self.topic = topic
        self.configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        self.configs.alter(
            "G",
            {
                "share.auto.offset.reset": "earliest",
                "share.delivery.count.limit": str(limit),
                DLQ_TOPIC: "dlq.t",
            },
        )
        self.metrics = BrokerMetrics()
        self.woken: list[tuple[str, int]] = []
        self.persister = CrashBeforeArchive(ShareStatePersister(self.logs))
        self.manager = SharePartitionManager(
            self.logs,
            self.configs,
            lambda t, p: self.woken.append((t, p)),
            persister=self.persister,  # type: ignore[arg-type]
            metrics=self.metrics,
        )

    def fetch(self, member: str = "m", partition: int = 0, now: int = 10) -> list[tuple[int, int]]:
        got = self.manager.fetch(
            "G", member, self.topic.topic_id, partition, max_bytes=1 << 20, max_records=500,
            now_ms=now,
        )  # fmt: skip
        return [(a.first_offset, a.last_offset) for a in got.acquired]

    def ack(self, batches: list[tuple[int, int, list[int]]], partition: int = 0) -> None:
        code = self.manager.acknowledge("G", "m", self.topic.topic_id, partition, batches, 20)
        assert code == 0

    def states(self, partition: int = 0) -> list[RecordState]:
        sp = self.manager.get("G", self.topic.topic_id, partition, 0)
        assert sp is not None
        return [sp.state_of(o)[0] for o in range(10)]

    def spso(self) -> int:
        sp = self.manager.get("G", self.topic.topic_id, 0, 0)
        assert sp is not None
        return sp.spso

    def dead_letters(self, partition: int = 0) -> list[tuple[bytes | None, bytes | None, dict]]:
        """(key, value, headers) of every record of the dead-letter partition."""
        plog = self.logs.log("dlq.t", partition)
        assert plog is not None
        if plog.log_end_offset == 0:
            return []
        data = plog.read(0, 1 << 20)
        out = []
        for pos, header in iter_batch_headers(data):
            _, records = decode_records(memoryview(data)[pos : pos + header.size])
            for rec in records:
                key, value = key_and_value(rec.tail)
                out.append((key, value, _headers(rec.tail)))
        return out

    def counted(self, sample: tuple[str, dict[str, str]]) -> float:
        value = self.metrics.registry.get_sample_value(*sample)
        return 0.0 if value is None else value


def _headers(tail: bytes) -> dict[str, str]:
    """The headers after a record's key and value."""
    pos = 0
    for _ in range(2):  # key, value
        length, pos = read_varint(tail, pos)
        pos += max(length, 0)
    count, pos = read_varint(tail, pos)
    out = {}
    for _ in range(count):
        klen, pos = read_varint(tail, pos)
        key = tail[pos : pos + klen].decode()
        pos += klen
        vlen, pos = read_varint(tail, pos)
        out[key] = tail[pos : pos + vlen].decode()
        pos += vlen
    return out


def _context(offset: int, count: int, reason: str, partition: int = 0) -> dict[str, str]:
    return {
        "__dlq.errors.topic": "t",
        "__dlq.errors.partition": str(partition),
        "__dlq.errors.offset": str(offset),
        "__dlq.errors.group": "G",
        "__dlq.errors.delivery.count": str(count),
        "__dlq.errors.message": reason,
    }


def test_rejected_records_are_copied_with_their_context_then_archived() -> None:
    b = Broker()
    assert b.fetch() == [(0, 9)]
    b.ack([(0, 1, [ACCEPT]), (2, 3, [REJECT]), (4, 9, [ACCEPT])])
    # Given up on, not yet archived: SPSO waits below them for the copy.
    assert b.states()[2:4] == [ARCHIVING] * 2 and b.spso() == 2
    assert b.dead_letters() == []
    described = ShareGroupOffsets(b.manager, b.logs, lambda: 25).describe("G", b.topic, 0)
    assert (described.archiving, described.lag) == (2, 2)  # still to be done
    assert "archiving=2" in described.extension()  # what shoal share-groups describe shows
    assert b.manager.copy_dead_letters(30) == 2
    assert b.dead_letters() == [
        (None, None, _context(2, 1, REJECTED)),
        (None, None, _context(3, 1, REJECTED)),
    ]
    assert b.states()[2:4] == [ARCHIVED] * 2 and b.spso() > 9
    assert b.counted(COPIED) == 2 and ("dlq.t", 0) in b.woken
    assert b.manager.copy_dead_letters(40) == 0  # nothing left: no second copy


def test_records_at_the_delivery_count_limit_are_copied() -> None:
    b = Broker(limit=2)
    for _ in range(2):
        assert b.fetch() == [(0, 9)]
        b.ack([(0, 9, [RELEASE])])
    assert b.states() == [ARCHIVING] * 10
    assert b.fetch() == []  # never delivered again while the copy is pending
    b.manager.copy_dead_letters(30)
    letters = b.dead_letters()
    assert [h for _, _, h in letters] == [_context(o, 2, DELIVERY_LIMIT) for o in range(10)]
    assert b.states() == [ARCHIVED] * 10


def test_copies_carry_key_and_value_when_the_group_asks() -> None:
    b = Broker()
    b.configs.alter("G", {DLQ_COPY_RECORD: "true"})
    b.fetch()
    b.ack([(0, 6, [ACCEPT]), (7, 8, [REJECT]), (9, 9, [ACCEPT])])
    b.manager.copy_dead_letters(30)
    assert [(k, v) for k, v, _ in b.dead_letters()] == [(b"k7", b"v7"), (b"k8", b"v8")]


def test_the_dead_letter_partition_is_the_source_partition_modulo_its_count() -> None:
    b = Broker(source_partitions=3, dlq_partitions=2)
    b.fetch(partition=2)
    b.ack([(0, 0, [REJECT]), (1, 9, [ACCEPT])], partition=2)
    b.manager.copy_dead_letters(30)
    assert b.dead_letters(1) == []  # 2 % 2
    assert [h for _, _, h in b.dead_letters(0)] == [_context(0, 1, REJECTED, partition=2)]


def test_without_a_dead_letter_topic_rejects_archive_at_once() -> None:
    b = Broker(dlq=None)
    b.configs.alter("G", {DLQ_TOPIC: None})
    b.fetch()
    b.ack([(0, 9, [REJECT])])
    assert b.states() == [ARCHIVED] * 10 and b.spso() > 9
    assert b.manager.copy_dead_letters(30) == 0


@pytest.mark.parametrize(
    ("dlq", "configs", "problem"),
    [
        (None, None, "dead-letter topic dlq.t of group G does not exist"),
        ("dlq.t", {}, "does not have errors.deadletterqueue.group.enable=true"),
        ("dlq.t", {DLQ_GROUP_ENABLE: "false"}, "errors.deadletterqueue.group.enable=true"),
    ],
)
def test_an_unusable_dead_letter_topic_archives_as_today_and_says_why(
    dlq: str | None, configs: dict[str, str] | None, problem: str, capsys: pytest.CaptureFixture
) -> None:
    b = Broker(dlq=dlq, dlq_configs=configs)
    b.fetch()
    b.ack([(0, 4, [REJECT]), (5, 9, [ACCEPT])])
    assert b.manager.copy_dead_letters(30) == 5
    assert b.states() == [ARCHIVED] * 10 and b.spso() > 9
    assert b.counted(NOT_COPIED) == 5 and b.counted(COPIED) == 0
    found = b.manager.dead_letter_problem("G")
    assert found is not None and problem in found
    if dlq is not None:
        assert b.dead_letters() == []
    # Logged once, however often it is met.
    b.fetch()  # nothing left to fetch; reject nothing new: meet the problem again by hand
    duty = b.manager._dead_letters
    assert isinstance(duty, DeadLetterCopier)
    duty._log_problem("G", found)
    assert capsys.readouterr().out.count("records archived without a dead-letter copy") == 1


def test_a_crash_between_copy_and_archive_copies_again_and_loses_nothing() -> None:
    b = Broker()
    b.fetch()
    b.ack([(0, 2, [REJECT]), (3, 9, [ACCEPT])])
    b.persister.armed = True
    with pytest.raises(Crash):
        b.manager.copy_dead_letters(30)
    assert len(b.dead_letters()) == 3  # the copy is in the log; its archiving is not
    restarted = Broker(logs=b.logs)
    assert restarted.states()[:3] == [ARCHIVING] * 3  # recovered as still to be copied
    assert restarted.spso() == 0
    assert restarted.manager.copy_dead_letters(40) == 3
    offsets = [h["__dlq.errors.offset"] for _, _, h in restarted.dead_letters()]
    assert offsets == ["0", "1", "2", "0", "1", "2"]  # duplicates, no loss
    assert restarted.spso() > 9  # all done
    again = Broker(logs=b.logs)  # and once archived, a restart copies nothing more
    assert again.manager.copy_dead_letters(50) == 0 and again.spso() > 9


def test_a_crash_before_the_reject_is_written_redelivers_the_record() -> None:
    b = Broker()
    b.fetch()
    restarted = Broker(logs=b.logs)  # the REJECT never reached the log
    assert restarted.fetch() == [(0, 9)]
    restarted.ack([(0, 9, [REJECT])])
    restarted.manager.copy_dead_letters(30)
    assert len(restarted.dead_letters()) == 10


def test_one_pass_copies_at_most_its_budget() -> None:
    b = Broker()
    b.fetch()
    b.ack([(0, 9, [REJECT])])
    assert b.manager.copy_dead_letters(30, budget=4) == 4
    assert b.states() == [ARCHIVED] * 4 + [ARCHIVING] * 6
    assert b.manager.copy_dead_letters(40, budget=4) == 4
    assert b.manager.copy_dead_letters(50, budget=4) == 2
    assert [h["__dlq.errors.offset"] for _, _, h in b.dead_letters()] == [str(o) for o in range(10)]


@pytest.mark.parametrize("copy_record", [False, True])
def test_a_compacted_dead_letter_topic_takes_only_copies_with_keys(copy_record: bool) -> None:
    b = Broker(dlq=None)
    b.logs.create_topic(
        "dlq.t", 1, logs=[MemoryLog(LogConfig(cleanup_policy="compact"))],
        configs={DLQ_GROUP_ENABLE: "true"},
    )  # fmt: skip
    b.configs.alter("G", {DLQ_COPY_RECORD: str(copy_record).lower()})
    b.fetch()
    b.ack([(0, 0, [REJECT]), (1, 9, [ACCEPT])])
    assert b.manager.copy_dead_letters(30) == 1  # archived either way, never stuck
    assert b.states()[0] is ARCHIVED
    problem = b.manager.dead_letter_problem("G")
    if copy_record:
        assert problem is None and [k for k, _, _ in b.dead_letters()] == [b"k0"]
    else:  # a pointer has no key: refused, archived without a copy, said why
        assert b.counted(NOT_COPIED) == 1 and b.dead_letters() == []
        assert problem is not None and "refuses the copies" in problem


def test_a_group_reading_its_own_dead_letter_topic_archives_without_copies() -> None:
    b = Broker(dlq=None)
    b.configs.alter("G", {DLQ_TOPIC: None})
    b.logs.create_topic("dlq.loop", 1, configs={DLQ_GROUP_ENABLE: "true"})
    plog = b.logs.log("dlq.loop", 0)
    assert plog is not None
    plog.append(build_batch([(b"k", b"v")] * 3, timestamp_ms=1), now_ms=1)
    b.configs.alter("G", {DLQ_TOPIC: "dlq.loop"})
    loop = b.logs.topic("dlq.loop")
    assert loop is not None
    b.topic = loop
    assert b.fetch() == [(0, 2)]
    b.ack([(0, 2, [REJECT])])
    assert b.manager.copy_dead_letters(30) == 3
    data = plog.read(0, 1 << 20)
    records = sum(h.last_offset - h.base_offset + 1 for _, h in iter_batch_headers(data)
                  if not h.is_control)  # fmt: skip
    assert records == 3  # no copies appended to the topic the group reads
    problem = b.manager.dead_letter_problem("G")
    assert problem is not None and "is the topic it reads" in problem


def test_an_archiving_write_that_fails_is_retried_without_copying_again(
    capsys: pytest.CaptureFixture,
) -> None:
    b = Broker()
    b.fetch()
    b.ack([(0, 2, [REJECT]), (3, 9, [ACCEPT])])
    b.persister.disk_full = True
    for now in (30, 40, 50):  # passes while the share state cannot be written
        assert b.manager.copy_dead_letters(now) == 0
    assert b.states()[:3] == [ARCHIVING] * 3
    assert len(b.dead_letters()) == 3  # copied once, not once a pass
    problem = b.manager.dead_letter_problem("G")
    assert problem is not None and "not written" in problem
    assert capsys.readouterr().out.count("dead letters not archived yet") == 1
    b.persister.disk_full = False
    assert b.manager.copy_dead_letters(60) == 3
    assert len(b.dead_letters()) == 3 and b.spso() > 9
    assert b.counted(COPIED) == 3 and b.manager.dead_letter_problem("G") is None


class FullDisk(MemoryLog):
    """A dead-letter log whose appends fail while `full` (ENOSPC)."""

    full = True

    def append(self, records: bytes, *, now_ms: int) -> AppendResult:  # type: ignore[override]
        if self.full:
            raise KafkaStorageError("No space left on device")
        return super().append(records, now_ms=now_ms)


def test_a_dead_letter_append_that_fails_keeps_the_records_until_it_succeeds() -> None:
    b = Broker(dlq=None)
    dlq_log = FullDisk()
    b.logs.create_topic("dlq.t", 1, logs=[dlq_log], configs={DLQ_GROUP_ENABLE: "true"})
    b.fetch()
    b.ack([(0, 1, [REJECT]), (2, 9, [ACCEPT])])
    assert b.manager.copy_dead_letters(30) == 0
    assert b.states()[:2] == [ARCHIVING] * 2  # not archived without their copies
    problem = b.manager.dead_letter_problem("G")
    assert problem is not None and "dlq.t not written" in problem
    dlq_log.full = False
    assert b.manager.copy_dead_letters(40) == 2
    assert [h["__dlq.errors.offset"] for _, _, h in b.dead_letters()] == ["0", "1"]


def test_the_reason_is_exact_until_a_restart_then_read_off_the_count() -> None:
    b = Broker(limit=2)
    b.fetch()
    b.ack([(0, 9, [RELEASE])])
    assert b.fetch() == [(0, 9)]  # the last delivery allowed
    # A REJECT on the last delivery is still a REJECT; a release there is the limit.
    b.ack([(0, 1, [REJECT]), (2, 3, [RELEASE]), (4, 9, [ACCEPT])])
    restarted = Broker(logs=b.logs, limit=2)  # a restart forgets why: inferred from counts
    assert restarted.states()[:4] == [ARCHIVING] * 4  # recovered before b copies them
    b.manager.copy_dead_letters(30)
    assert [h["__dlq.errors.message"] for _, _, h in b.dead_letters()] == [
        REJECTED, REJECTED, DELIVERY_LIMIT, DELIVERY_LIMIT,
    ]  # fmt: skip
    restarted.manager.copy_dead_letters(40)
    assert [h["__dlq.errors.message"] for _, _, h in restarted.dead_letters()][4:] == [
        DELIVERY_LIMIT
    ] * 4
