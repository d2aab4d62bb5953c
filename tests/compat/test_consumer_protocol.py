"""confluent-kafka `Consumer`s with `group.protocol=consumer` (KIP-848) against Shoal.

Each consumer runs in its own process (`tests/compat/consumer_worker.py`), which records the
partitions librdkafka assigns and revokes (incrementally, as KIP-848 does) and every record it
reads. No offsets are committed (`enable.auto.commit=False`), so records are produced only once
the group has settled: each is then read by the one member that owns its partition.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import ConsumerGroupState
from confluent_kafka import ConsumerGroupType
from confluent_kafka import Producer

from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

TOPIC, GROUP, PARTITIONS = "orders", "auditors", 6
# Short timeouts so a killed member goes quickly; their minimums are lowered to allow them.
CONFIG = {
    "group.consumer.min.session.timeout.ms": 3000,
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 500,
}


def _owned(out: Path) -> set[int]:
    """The partitions a worker holds now, from its A/R/L lines."""
    owned: set[int] = set()
    for line in out.read_text().splitlines() if out.exists() else ():
        tag, _, rest = line.partition(" ")
        parts = {int(p) for p in rest.split(",") if p} if tag in "ARL" else set()
        owned = owned | parts if tag == "A" else owned - parts if tag in "RL" else owned
    return owned


def _records(out: Path) -> list[tuple[int, str]]:
    return [
        (int(line.split()[1]), line.split()[3])
        for line in out.read_text().splitlines()
        if line.startswith("M ")
    ]


def _moves(outs: list[Path]) -> int:
    """How many assignment changes (A/R/L lines) the workers have logged so far."""
    return sum(1 for o in outs for line in o.read_text().splitlines() if line[:1] in "ARL")


def _read_once(
    outs: list[Path], sent: set[tuple[int, str]], tag: str
) -> list[list[tuple[int, str]]] | None:
    """The records of `tag` each worker read: each exactly once while the group stays as it
    was; if a member was fenced meanwhile (a heartbeat late on a loaded machine: Kafka fences
    it too) its partitions were read again from the start (nothing is committed), so then
    each at least once. None in that case."""
    moves = _moves(outs)
    got = _read(outs, sent, tag)
    records = sorted(r for rs in got for r in rs)
    if _moves(outs) == moves:
        assert records == sorted(sent)
        return got
    assert set(records) == sent
    return None


def _wait_for(split: list[set[int]], outs: list[Path], timeout: float = 60) -> list[set[int]]:
    """Until the workers' holdings have the sizes in `split` and cover every partition."""
    deadline = time.monotonic() + timeout
    while True:
        owned = [_owned(o) for o in outs]
        if sorted(len(o) for o in owned) == sorted(len(s) for s in split) and set().union(
            *owned
        ) == set(range(PARTITIONS)):
            return owned
        assert time.monotonic() < deadline, owned
        time.sleep(0.2)


def _produce(bootstrap: str, tag: str, count: int) -> set[tuple[int, str]]:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    sent = set()
    for i in range(count):
        value = f"{tag}-{i}"
        producer.produce(TOPIC, value=value.encode(), partition=i % PARTITIONS)
        sent.add((i % PARTITIONS, value))
    assert producer.flush(10) == 0
    return sent


def _read(outs: list[Path], sent: set[tuple[int, str]], tag: str) -> list[list[tuple[int, str]]]:
    deadline = time.monotonic() + 30
    while True:
        got = [[r for r in _records(o) if r[1].startswith(tag + "-")] for o in outs]
        if {r for rs in got for r in rs} >= sent or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_members_share_partitions_hand_them_over_and_expire(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", CONFIG)
    outs = [tmp_path / f"worker{i}.txt" for i in range(3)]
    workers = []
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.compat.consumer_worker",
                    broker.bootstrap,
                    GROUP,
                    TOPIC,
                    str(out),
                ],
            )
            for out in outs
        ]
        # Three members: two partitions each, every record read by its partition's owner only.
        owned = _wait_for([{0, 1}, {2, 3}, {4, 5}], outs)
        sent = _produce(broker.bootstrap, "first", 60)
        got = _read_once(outs, sent, "first")
        if got is not None:  # a stable group: each record read by its partition's owner only
            for held, records in zip(owned, got, strict=True):
                assert {p for p, _ in records} <= held

        # A member that closes revokes its partitions; the other two take them over.
        workers[0].send_signal(signal.SIGTERM)
        assert workers[0].wait(30) == 0
        assert outs[0].read_text().splitlines()[-2].startswith("R ")
        assert _owned(outs[0]) == set()
        owned = _wait_for([set(), {0, 1, 2}, {3, 4, 5}], outs)
        assert owned[1] | owned[2] == set(range(PARTITIONS))
        sent = _produce(broker.bootstrap, "second", 60)
        _read_once(outs[1:], sent, "second")

        # A member killed outright is removed after the session timeout: the last one has all.
        workers[1].kill()
        workers[1].wait(10)
        owned = _wait_for([set(), set(), set(range(PARTITIONS))], [outs[0], outs[0], outs[2]])
        client = admin(broker.bootstrap)  # ConsumerGroupDescribe, as librdkafka's admin sends it
        described = client.describe_consumer_groups([GROUP])[GROUP].result(10)
        assert described.state == ConsumerGroupState.STABLE
        assert described.type == ConsumerGroupType.CONSUMER
        (member,) = described.members
        assert {tp.partition for tp in member.assignment.topic_partitions} == set(range(6))
        sent = _produce(broker.bootstrap, "third", 30)
        got = _read(outs[2:], sent, "third")
        assert sorted(got[0]) == sorted(sent)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(10)
        broker.stop()


def test_a_regex_subscription_reads_the_matching_topics(tmp_path: Path) -> None:
    """librdkafka sends a `^` subscription as SubscribedTopicRegex (v1); Kafka matches it
    against topic names whole, with RE2."""
    broker = start_broker(tmp_path / "data")
    try:
        for topic in ("audit-a", "audit-b", "payments"):
            create_topic(broker.bootstrap, topic, 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        for topic in ("audit-a", "audit-b", "payments"):
            producer.produce(topic, value=topic.encode(), partition=0)
        assert producer.flush(10) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "by-regex",
                "group.protocol": "consumer",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        consumer.subscribe(["^audit-.*"])
        topics: set[str] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(topics) < 2:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                topics.add(m.topic())
        assert sorted(topics) == ["audit-a", "audit-b"]
        assert sorted(tp.topic for tp in consumer.assignment()) == ["audit-a", "audit-b"]
        consumer.close()
    finally:
        broker.stop()
