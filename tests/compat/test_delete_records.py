"""DeleteRecords (21) through confluent-kafka's AdminClient, Consumer and ShareConsumer.

The new low watermark is what the AdminClient returns, what ListOffsets EARLIEST answers and
where a Consumer at OFFSET_BEGINNING starts; it survives a graceful restart and kill -9. A
share group with records in flight below the new start never gets them (again), its SPSO
moves to the log start (DescribeShareGroupOffsets through our admin client) and stays there
after kill -9, and nothing it ACCEPTed is delivered again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import AcknowledgeType
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from client.admin import Admin
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import error_code
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

CONFIG = {**SHORT_SESSION_CONFIG, "log.segment.bytes": 4096}  # several segments to delete
SMALL_SEGMENTS = {**SHORT_SESSION_CONFIG, "log.segment.bytes": 500}  # about 3 batches each


def produce(bootstrap: str, topic: str, count: int, per_batch: int = 10) -> None:
    """`count` records in batches of `per_batch` (each flushed alone), so the log start can
    fall inside a batch."""
    # A linger longer than it takes to queue a batch's records: flush() then sends them as one.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 100, **QUIET})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=0)
        if (i + 1) % per_batch == 0:
            assert producer.flush(10) == 0
    assert producer.flush(10) == 0


def delete_records(bootstrap: str, topic: str, offset: int) -> int:
    client = admin(bootstrap)
    futures = client.delete_records([TopicPartition(topic, 0, offset)])
    (future,) = futures.values()
    return int(future.result(15).low_watermark)


def earliest(bootstrap: str, topic: str) -> int:
    client = admin(bootstrap)
    tp = TopicPartition(topic, 0)
    return int(client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(15).offset)


def first_offset_from_beginning(bootstrap: str, topic: str, offset: int = OFFSET_BEGINNING) -> int:
    """The first record a Consumer assigned at `offset` gets (below the log start, the Fetch
    answers OFFSET_OUT_OF_RANGE and auto.offset.reset=earliest takes it to the start)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "from-beginning",
            "auto.offset.reset": "earliest",
            **QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return int(msg.offset())
        raise AssertionError("no record from OFFSET_BEGINNING")
    finally:
        consumer.close()


def test_admin_client_delete_records_survives_restart_and_kill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data, CONFIG)
    try:
        b = broker.bootstrap
        create_topic(b, "purge", 1)
        produce(b, "purge", 200)
        assert delete_records(b, "purge", 45) == 45  # inside the batch 40-49
        assert earliest(b, "purge") == 45
        assert first_offset_from_beginning(b, "purge") == 45
        assert first_offset_from_beginning(b, "purge", offset=12) == 45  # Fetch below: refused
        assert delete_records(b, "purge", 10) == 45  # below the start: nothing changes

        client = admin(b)
        (refused,) = client.delete_records([TopicPartition("purge", 0, 201)]).values()
        with pytest.raises(Exception) as info:
            refused.result(15)
        assert error_code(info.value) == KafkaError.OFFSET_OUT_OF_RANGE

        broker.stop()
        broker = start_broker(data, CONFIG)
        b = broker.bootstrap
        assert earliest(b, "purge") == 45
        assert delete_records(b, "purge", 133) == 133
        broker.kill()  # kill -9 right after the answer: it was durable before it
        broker = start_broker(data, CONFIG)
        b = broker.bootstrap
        assert earliest(b, "purge") == 133
        assert first_offset_from_beginning(b, "purge") == 133
        assert delete_records(b, "purge", -1) == 200  # -1: up to the high watermark
        assert earliest(b, "purge") == 200
    finally:
        broker.kill()


async def _spso(bootstrap: str, group: str, topic: str) -> int:
    async with Admin(bootstrap) as client:
        offsets = await client.describe_share_group_offsets(group, [(topic, 0)])
    return offsets[(topic, 0)].start_offset


def spso(bootstrap: str, group: str, topic: str) -> int:
    return asyncio.run(_spso(bootstrap, group, topic))


def poll_all(consumer: ShareConsumer, want: int, timeout: float = 30) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += poll_records(consumer)
    return got


def first_poll(consumer: ShareConsumer, timeout: float = 30) -> list[Message]:
    """The first poll that returns records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = poll_records(consumer)
        if got:
            return got
    return []


Held = list[tuple[ShareConsumer, list[Message]]]


def acquire(bootstrap: str, group: str, topic: str, want: int) -> Held:
    """Members that together hold `want` records, each from a single poll: in explicit mode a
    member may not poll again before acknowledging all it holds, and these stay acquired (a
    poll may return only part of what one fetch acquired, so more members may be needed)."""
    held: Held = []
    while sum(len(polled) for _, polled in held) < want and len(held) < 10:
        consumer = share_consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
        consumer.subscribe([topic])
        held.append((consumer, first_poll(consumer)))
    return held


def test_share_group_in_flight_below_the_new_start(tmp_path: Path) -> None:
    """The group's checkpoint lies below the new start, in a segment DeleteRecords deletes:
    the group's progress is written above the start first, and survives kill -9."""
    data = tmp_path / "data"
    broker = start_broker(data, SMALL_SEGMENTS)
    topic, group = "queue", "workers"
    try:
        b = broker.bootstrap
        create_topic(b, topic, 1)
        set_group_configs(b, group, {"share.auto.offset.reset": "earliest"})
        produce(b, topic, 20, per_batch=20)
        held = acquire(b, group, topic, 20)  # the group's first checkpoint follows them, at 20
        produce(b, topic, 80, per_batch=80)
        held += acquire(b, group, topic, 80)
        offsets = sorted(m.offset() for _, polled in held for m in polled)
        assert len(offsets) == 100 and offsets[0] == 0, offsets
        accepted = {o for o in offsets if o < 10 or 60 <= o < 80}
        for consumer, polled in held:
            for m in polled:
                if m.offset() in accepted:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            assert all(tp.error is None for tp in consumer.commit_sync())
        # Everything else is still acquired; delete everything below 50.
        assert delete_records(b, topic, 50) == 50
        assert spso(b, group, topic) == 50
        for consumer, _ in held:  # what they hold is released: only records from 50 come back
            consumer.close()

        broker.kill()
        broker = start_broker(data, SMALL_SEGMENTS)
        b = broker.bootstrap
        assert spso(b, group, topic) == 50
        segments = sorted(int(p.stem) for p in (data / f"{topic}-0").glob("*.log"))
        assert 20 < segments[0] <= 50  # the group's old checkpoint at 20 is gone with them
        second = share_consumer(b, group)
        second.subscribe([topic])
        expected = [o for o in offsets if o >= 50 and o not in accepted]
        again = poll_all(second, len(expected))
        time.sleep(1)
        again += poll_records(second)
        second.close()
        assert sorted(m.offset() for m in again) == expected
        assert not {m.offset() for m in again} & accepted
    finally:
        broker.kill()
