"""Consumer groups with commits, both protocols: each record once, across a handover and a
kill -9 of the broker (issue 13's "Must show" for confluent-kafka).

Three librdkafka `Consumer.subscribe` members (`tests/compat/committing_worker.py`, each in its
own process) share a 6-partition topic and commit after every batch. The accounting is
exact: a record may be delivered a second time only if no acknowledged commit covered it
before that second delivery (it was uncommitted at the handover or the kill). Every record
is delivered, and in the end the committed offsets are the log ends.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import Producer
from confluent_kafka import TopicPartition

from tests.brokers import BrokerProcess
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

TOPIC, GROUP, PARTITIONS = "ledger", "bookkeepers", 6
CONFIG = {
    "group.initial.rebalance.delay.ms": 300,
    "group.consumer.min.session.timeout.ms": 3000,
    "group.consumer.session.timeout.ms": 3000,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 500,
}


class Log:
    """One worker's output file, parsed."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[list[str]]:
        text = self.path.read_text() if self.path.exists() else ""
        return [line.split(" ") for line in text.splitlines() if line.endswith(tuple("0123456789"))]

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for tag, *rest in self.lines():
            parts = {int(p) for p in rest[0].split(",") if p} if tag in "AVL" else set()
            owned = owned | parts if tag == "A" else owned - parts
        return owned

    def deliveries(self) -> list[tuple[int, int, str, float]]:
        """(partition, offset, value, time) of every record it was given."""
        return [(int(p), int(o), v, float(t)) for tag, p, o, v, t in
                (x for x in self.lines() if x[0] == "R")]  # fmt: skip

    def commits(self) -> list[tuple[int, int, float]]:
        """(partition, next offset, time) of every acknowledged commit."""
        return [(int(x[1]), int(x[2]), float(x[3])) for x in self.lines() if x[0] == "C"]


def _wait(what: str, done: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _split(logs: list[Log], sizes: list[int]) -> bool:
    """Each log's member owns sizes[i] partitions, together all of them, none twice."""
    owned = [log.owned() for log in logs]
    together = [p for o in owned for p in o]
    return [len(o) for o in owned] == sizes and sorted(together) == list(range(PARTITIONS))


def _produce(bootstrap: str, tag: str, count: int) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    values = {f"{tag}-{i}" for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(TOPIC, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0
    return values


def _delivered(logs: list[Log]) -> set[str]:
    return {v for log in logs for _, _, v, _ in log.deliveries()}


def _committed_through(logs: list[Log], values: set[str]) -> bool:
    """Every record of `values` was delivered and an acknowledged commit covers it."""
    where = {v: (p, o) for log in logs for p, o, v, _ in log.deliveries() if v in values}
    top: dict[int, int] = defaultdict(int)
    for log in logs:
        for p, offset, _ in log.commits():
            top[p] = max(top[p], offset)
    return set(where) == values and all(o < top[p] for p, o in where.values())


def _unjustified_redeliveries(logs: list[Log]) -> list[tuple[int, int]]:
    """(partition, offset) delivered again after an acknowledged commit had covered it."""
    times: dict[tuple[int, int], list[float]] = defaultdict(list)
    for log in logs:
        for p, o, _, t in log.deliveries():
            times[(p, o)].append(t)
    commits = [c for log in logs for c in log.commits()]
    bad = []
    for (p, o), ts in sorted(times.items()):
        for again in sorted(ts)[1:]:
            if any(cp == p and offset > o and at < again for cp, offset, at in commits):
                bad.append((p, o))
    return bad


def _committed_offsets(bootstrap: str) -> dict[int, int]:
    client = admin(bootstrap)
    request = ConsumerGroupTopicPartitions(GROUP)
    (result,) = client.list_consumer_group_offsets([request]).values()
    return {tp.partition: tp.offset for tp in result.result(10).topic_partitions}


def _log_ends(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "log_level": 0})
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()
    return ends


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_each_record_once_with_commits_across_a_handover_and_a_broker_kill(
    tmp_path: Path, protocol: str
) -> None:
    broker: BrokerProcess = start_broker(tmp_path / "data", CONFIG)
    logs = [Log(tmp_path / f"member-{i}.log") for i in range(3)]
    members: list[subprocess.Popen[bytes]] = []
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        members = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.compat.committing_worker", broker.bootstrap,
                 GROUP, TOPIC, str(log.path), protocol],
                stderr=subprocess.DEVNULL,
            )
            for log in logs
        ]  # fmt: skip
        _wait("three members with two partitions each", lambda: _split(logs, [2, 2, 2]))
        sent = _produce(broker.bootstrap, "first", 120)
        _wait("the first records read and committed", lambda: _committed_through(logs, sent))

        # A member that leaves hands its partitions over; the others resume at its commits.
        members[0].send_signal(signal.SIGTERM)
        assert members[0].wait(30) == 0
        _wait("two members with all six partitions", lambda: _split(logs[1:], [3, 3]))
        sent |= _produce(broker.bootstrap, "second", 120)
        _wait("the second records read and committed", lambda: _committed_through(logs, sent))

        # kill -9 of the broker: the commits it acknowledged are there when it is back.
        before = _committed_offsets(broker.bootstrap)
        assert sum(before.values()) == len(sent)
        broker.kill()
        broker.start()
        assert _committed_offsets(broker.bootstrap) == before
        sent |= _produce(broker.bootstrap, "third", 120)
        _wait("the third records read and committed", lambda: _committed_through(logs, sent))

        assert _delivered(logs) == sent
        assert _unjustified_redeliveries(logs) == []
        assert _committed_offsets(broker.bootstrap) == _log_ends(broker.bootstrap)
        # The member that left read nothing after it left; the others read every later record.
        assert {v for _, _, v, _ in logs[0].deliveries()} <= {v for v in sent if v[0] == "f"}
    finally:
        for m in members:
            if m.poll() is None:
                m.kill()
                m.wait(10)
        broker.stop()
