"""Classic consumer groups with librdkafka's `Consumer.subscribe` (JoinGroup/SyncGroup).

Three members in child processes share a 6-partition topic: each partition goes to exactly
one member, and every record is read once while the generation is stable. A member that
closes (LeaveGroup) hands its partitions over; one that is killed is removed after its
session timeout. Commits, handovers and a broker kill -9: `test_group_exactly_once.py`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka import ConsumerGroupType
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer

from client.admin import Admin
from tests.brokers import BrokerProcess
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import error_code
from tests.compat.support import poll_until
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = pytest.mark.compat

PARTITIONS = 6
SESSION_MS = 6000  # group.min.session.timeout.ms: the least Kafka's default bounds allow
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 300}


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.compat.group_worker", bootstrap, group, topic,
             str(out), str(SESSION_MS)],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []

    def assignment(self) -> set[int] | None:
        """The partitions of its last assignment, None when revoked or never assigned."""
        current: set[int] | None = None
        for line in self.lines():
            if line.startswith("A "):
                current = {int(p) for p in line[2:].split(",") if p}
            elif line == "V":
                current = None
        return current

    def records(self) -> list[str]:
        return [line.split(" ", 3)[3] for line in self.lines() if line.startswith("R ")]

    def close(self) -> None:
        Path(f"{self.out}.stop").touch()
        self.proc.wait(30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _wait(what: str, done: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def _partitioned(members: list[Member]) -> bool:
    """Every partition is assigned to exactly one of `members`, each holding some."""
    owned = [m.assignment() for m in members]
    if any(not a for a in owned):
        return False
    counts = Counter(p for a in owned for p in a or ())
    return sorted(counts) == list(range(PARTITIONS)) and set(counts.values()) == {1}


def _produce(bootstrap: str, topic: str, prefix: str, n: int) -> list[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    values = [f"{prefix}-{i}" for i in range(n)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    return values


def _read_once(members: list[Member], values: list[str]) -> bool:
    got = Counter(r for m in members for r in m.records() if r in set(values))
    return set(got) == set(values)


BROKER_PER_TEST = True  # each test starts from an empty broker


def _start(broker: BrokerProcess, tmp_path: Path, topic: str, n: int) -> list[Member]:
    create_topic(broker.bootstrap, topic, PARTITIONS)
    return [
        Member(broker.bootstrap, f"{topic}-group", topic, tmp_path / f"member-{i}.log")
        for i in range(n)
    ]


def test_three_members_split_the_partitions_and_read_everything_once(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    members = _start(broker, tmp_path, "orders", 3)
    try:
        _wait("three members holding all six partitions", lambda: _partitioned(members))
        client = admin(broker.bootstrap)  # kept: its futures fail once it is destroyed
        group = client.describe_consumer_groups(["orders-group"])["orders-group"].result(10)
        assert group.state == ConsumerGroupState.STABLE
        assert len(group.members) == 3
        values = _produce(broker.bootstrap, "orders", "first", 60)
        _wait("every record read", lambda: _read_once(members, values))
        got = Counter(r for m in members for r in m.records())
        assert got == Counter(values)  # once each: nobody read a partition it did not own

        members[0].close()
        rest = members[1:]
        _wait("the two left holding all six partitions", lambda: _partitioned(rest))
        more = _produce(broker.bootstrap, "orders", "second", 60)
        _wait("every later record read", lambda: _read_once(rest, more))
        later = Counter(r for m in rest for r in m.records() if r.startswith("second-"))
        assert later == Counter(more)
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()


def test_a_killed_member_is_removed_after_its_session_timeout(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    members = _start(broker, tmp_path, "audit", 3)
    try:
        _wait("three members holding all six partitions", lambda: _partitioned(members))
        members[2].kill()  # no LeaveGroup: only the session timeout tells the broker
        killed_at = time.monotonic()
        rest = members[:2]
        _wait("the two left holding all six partitions", lambda: _partitioned(rest))
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1.5
        client = admin(broker.bootstrap)
        group = client.describe_consumer_groups(["audit-group"])["audit-group"].result(10)
        assert len(group.members) == 2
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()


def test_a_share_group_and_a_consumer_group_each_read_everything(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, "events", 2)
    set_group_configs(broker.bootstrap, "workers", {"share.auto.offset.reset": "earliest"})
    values = {f"event-{i}" for i in range(40)}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for i, value in enumerate(sorted(values)):
        producer.produce("events", value=value.encode(), partition=i % 2)
    assert producer.flush(10) == 0
    auditor = Member(broker.bootstrap, "auditors", "events", tmp_path / "auditor.log")
    worker = share_consumer(broker.bootstrap, "workers")
    worker.subscribe(["events"])
    shared: list[str] = []
    try:
        poll_until(
            [worker],
            lambda: set(shared) >= values and set(auditor.records()) >= values,
            lambda _c, records: shared.extend(m.value().decode() for m in records),
            timeout=60,
        )
        assert Counter(shared) == Counter(values)  # implicit mode: each accepted once
        assert Counter(auditor.records()) == Counter(values)
        client = admin(broker.bootstrap)  # librdkafka lists classic and consumer groups only
        listed = client.list_consumer_groups().result(10).valid
        assert [(g.group_id, g.type) for g in listed] == [("auditors", ConsumerGroupType.CLASSIC)]
        assert asyncio.run(_kinds(broker.bootstrap)) == {
            ("auditors", "classic", "consumer"),
            ("workers", "share", "share"),
        }
    finally:
        worker.close()
        if auditor.proc.poll() is None:
            auditor.kill()


async def _kinds(bootstrap: str) -> set[tuple[str, str, str]]:
    """(group, type, protocol type) of every group, by our client's ListGroups v5."""
    async with Admin(bootstrap) as client:
        return {(g.group_id, g.group_type, g.protocol_type) for g in await client.list_groups()}


def test_a_consumer_group_is_listed_and_deleted_only_once_empty(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    (member,) = _start(broker, tmp_path, "ledger", 1)
    client = admin(broker.bootstrap)
    try:
        _wait("the member holding all six partitions", lambda: _partitioned([member]))
        listed = client.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert [g.group_id for g in listed.valid] == ["ledger-group"]
        with pytest.raises(KafkaException) as refused:
            client.delete_consumer_groups(["ledger-group"])["ledger-group"].result(10)
        assert error_code(refused.value) == KafkaError.NON_EMPTY_GROUP
        member.close()  # LeaveGroup: the group is Empty at once
        listed = client.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(10)
        assert [g.group_id for g in listed.valid] == ["ledger-group"]
        client.delete_consumer_groups(["ledger-group"])["ledger-group"].result(10)
        assert client.list_consumer_groups().result(10).valid == []
    finally:
        if member.proc.poll() is None:
            member.kill()
