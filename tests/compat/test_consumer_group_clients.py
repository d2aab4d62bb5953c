"""Other clients' consumer groups: aiokafka and kafka-python join (JoinGroup/SyncGroup with
their own versions and assignors), consume every record of a topic and commit (OffsetCommit
and OffsetFetch in their versions); the next member of the group resumes at the commits."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import Producer
from kafka import KafkaConsumer

from tests.brokers import BrokerProcess
from tests.compat.support import admin
from tests.compat.support import create_topic

pytestmark = pytest.mark.compat

PARTITIONS = 3
VALUES = [f"record-{i}" for i in range(30)]
LATER = [f"later-{i}" for i in range(PARTITIONS)]


BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 100}
BROKER_PER_TEST = True  # each test starts from an empty broker


def _produce(bootstrap: str, topic: str, values: list[str] = VALUES) -> None:
    if values is VALUES:
        create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(10) == 0


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets, as confluent-kafka's admin client lists them."""
    client = admin(bootstrap)
    (future,) = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {tp.partition: tp.offset for tp in future.result(10).topic_partitions}


def _members(bootstrap: str, group: str) -> int:
    client = admin(bootstrap)
    return len(client.describe_consumer_groups([group])[group].result(10).members)


def test_aiokafka_consumer_with_a_group_id_joins_and_consumes(broker: BrokerProcess) -> None:
    _produce(broker.bootstrap, "aio")

    async def consume(wanted: int) -> tuple[list[str], set[int]]:
        consumer = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=broker.bootstrap,
            group_id="aio-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[str] = []
        try:
            async with asyncio.timeout(60):
                while len(got) < wanted:
                    batches = await consumer.getmany(timeout_ms=500)
                    got += [r.value.decode() for rs in batches.values() for r in rs]
            await consumer.commit()
            assigned = {tp.partition for tp in consumer.assignment()}
            assert _members(broker.bootstrap, "aio-group") == 1
        finally:
            await consumer.stop()
        return got, assigned

    # Bounded as a whole: without consumer groups aiokafka retries JoinGroup for ever, and
    # its stop() waits for that loop.
    got, assigned = asyncio.run(asyncio.wait_for(consume(len(VALUES)), 90))
    assert sorted(got) == sorted(VALUES)
    assert assigned == set(range(PARTITIONS))
    assert _committed(broker.bootstrap, "aio-group") == dict.fromkeys(range(PARTITIONS), 10)
    _produce(broker.bootstrap, "aio", LATER)
    again, _ = asyncio.run(asyncio.wait_for(consume(len(LATER)), 90))
    assert sorted(again) == sorted(LATER)  # resumed at the commits: nothing read twice


def _kafka_python_read(bootstrap: str, wanted: int) -> list[str]:
    consumer = KafkaConsumer(
        "kp",
        bootstrap_servers=bootstrap,
        group_id="kp-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < wanted and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value.decode() for r in records]
        consumer.commit()
        assert {tp.partition for tp in consumer.assignment()} == set(range(PARTITIONS))
        assert _members(bootstrap, "kp-group") == 1
    finally:
        consumer.close()
    return got


def test_kafka_python_consumer_with_a_group_id_joins_and_consumes(broker: BrokerProcess) -> None:
    _produce(broker.bootstrap, "kp")
    assert sorted(_kafka_python_read(broker.bootstrap, len(VALUES))) == sorted(VALUES)
    assert _committed(broker.bootstrap, "kp-group") == dict.fromkeys(range(PARTITIONS), 10)
    _produce(broker.bootstrap, "kp", LATER)
    assert sorted(_kafka_python_read(broker.bootstrap, len(LATER))) == sorted(LATER)
