"""Subscribed confluent-kafka Consumers commit through the group they joined, in both group
protocols: the commit is checked against the group's generation or member epoch, and a later
member of the group resumes where the last one committed, also after the broker was killed."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Message
from confluent_kafka import Producer

from tests.compat.support import create_topic
from tests.compat.support import start_broker

TOPIC = "commits"
CONFIG = {
    "group.initial.rebalance.delay.ms": 100,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
}


def _produce(bootstrap: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(first, first + count):
        producer.produce(TOPIC, key=b"k", value=str(i).encode())
    assert producer.flush(10) == 0


def _consume(bootstrap: str, group: str, protocol: str, wanted: int) -> list[int]:
    """Join, read `wanted` records, commit them synchronously, leave."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([TOPIC])
    got: list[Message] = []
    try:
        for _ in range(120):
            for m in consumer.consume(wanted - len(got), timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
            if len(got) >= wanted:
                break
        assert len(got) == wanted, [m.value() for m in got]
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()
    return [int(m.value()) for m in got]  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_resumes_from_its_commits_across_a_kill(tmp_path: Path, protocol: str) -> None:
    broker = start_broker(tmp_path / "data", CONFIG)
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        _produce(broker.bootstrap, 0, 10)
        group = f"resume-{protocol}"
        assert _consume(broker.bootstrap, group, protocol, 10) == list(range(10))
        _produce(broker.bootstrap, 10, 5)
        assert _consume(broker.bootstrap, group, protocol, 3) == [10, 11, 12]
        broker.kill()  # kill -9: the acknowledged commits must hold
        broker.start()
        assert _consume(broker.bootstrap, group, protocol, 2) == [13, 14]
    finally:
        broker.stop()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_commit_from_outside_a_live_group_is_refused(tmp_path: Path, protocol: str) -> None:
    """A consumer that assigns itself commits as a "simple" consumer (no member, generation
    -1): allowed into an empty group, refused while the group has members, as Kafka does."""
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition

    broker = start_broker(tmp_path / "data", CONFIG)
    group = f"live-{protocol}"
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": group}
    member = Consumer({**settings, "group.protocol": protocol, "auto.offset.reset": "earliest"})
    outsider = Consumer({**settings, "enable.auto.commit": False})
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        _produce(broker.bootstrap, 0, 3)
        member.subscribe([TOPIC])
        for _ in range(60):  # until the member holds its partition
            if member.consume(1, timeout=0.5) or member.assignment():
                break
        assert member.assignment()
        with pytest.raises(KafkaException) as refused:
            outsider.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
        assert refused.value.args[0].name() == "UNKNOWN_MEMBER_ID"
        member.close()
        committed = outsider.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
        assert committed is not None and committed[0].error is None  # the group is empty now
    finally:
        outsider.close()
        broker.stop()
