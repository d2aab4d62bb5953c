"""Committed offsets with confluent-kafka's real clients: a `Consumer` with a `group.id` and
`assign()` commits and a new one resumes there; the AdminClient lists and alters a group's
offsets; commits hold across a graceful restart and a kill -9 of the broker process."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import Producer
from confluent_kafka import TopicPartition

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import create_topic

pytestmark = pytest.mark.compat

TOPIC, GROUP = "ledger", "auditors"


BROKER_PER_TEST = True  # each test starts from an empty broker


@pytest.fixture(autouse=True)
def _records(broker: BrokerProcess) -> None:
    """Each test's broker holds TOPIC (two partitions), ten records in partition 0."""
    create_topic(broker.bootstrap, TOPIC, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(10):
        producer.produce(TOPIC, value=b"%d" % i, partition=0)
    assert producer.flush(10) == 0


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **QUIET,
        }
    )  # fmt: skip


def _read(consumer: Consumer, count: int, timeout: float = 20) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    return got


def _committed(
    bootstrap: str, partitions: list[TopicPartition] | None
) -> dict[tuple[str, int], int]:
    client = admin(bootstrap)
    request = ConsumerGroupTopicPartitions(GROUP, partitions)
    result = client.list_consumer_group_offsets([request])[GROUP].result(10)
    for tp in result.topic_partitions:
        assert tp.error is None, tp.error
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def test_an_assigned_consumer_commits_and_the_next_one_resumes_there(
    broker: BrokerProcess,
) -> None:
    first = _consumer(broker.bootstrap)
    first.assign([TopicPartition(TOPIC, 0)])
    assert _read(first, 4) == [b"0", b"1", b"2", b"3"]
    first.commit(asynchronous=False)  # the consumer's position: offset 4
    first.close()

    second = _consumer(broker.bootstrap)
    second.assign([TopicPartition(TOPIC, 0)])
    assert _read(second, 6) == [b"%d" % i for i in range(4, 10)]
    assert second.committed([TopicPartition(TOPIC, 0)], 10)[0].offset == 4
    second.close()


def test_the_admin_client_alters_and_lists_a_groups_offsets(broker: BrokerProcess) -> None:
    client = admin(broker.bootstrap)
    change = ConsumerGroupTopicPartitions(
        GROUP, [TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 0)]
    )
    altered = client.alter_consumer_group_offsets([change])[GROUP].result(10)
    assert all(tp.error is None for tp in altered.topic_partitions)
    every = _committed(broker.bootstrap, None)  # no partitions named: all the group's
    assert every == {(TOPIC, 0): 7, (TOPIC, 1): 0}
    consumer = _consumer(broker.bootstrap)
    consumer.assign([TopicPartition(TOPIC, 0)])
    assert _read(consumer, 3) == [b"7", b"8", b"9"]
    consumer.close()


@pytest.mark.parametrize("how", ["kill -9", "graceful"])
def test_committed_offsets_survive_a_restart(broker: BrokerProcess, how: str) -> None:
    consumer = _consumer(broker.bootstrap)
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
    consumer.commit(offsets=[TopicPartition(TOPIC, 1, 3)], asynchronous=False)
    consumer.close()
    if how == "kill -9":
        broker.kill()
    else:
        broker.stop()
    broker.start()
    asked = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    assert _committed(broker.bootstrap, asked) == {(TOPIC, 0): 5, (TOPIC, 1): 3}
