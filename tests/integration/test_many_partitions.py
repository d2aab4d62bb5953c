"""Thousands of partitions under a small `ulimit -n`, and requests for far too many (issue 9).

CreateTopics with 1,000,000 partitions created 19,986 directories, ran out of file handles,
left them orphaned and made SIGTERM take 77 s. Now the request is refused before anything is
made, and segment files are opened on demand (an LRU of descriptors), so a broker whose process
may open 256 files serves 2,000 partitions.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewPartitions
from confluent_kafka.admin import NewTopic

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import error_code

pytestmark = pytest.mark.integration
TOPICS, PER_TOPIC = 4, 500
INVALID_PARTITIONS = 37


def test_two_thousand_partitions_with_256_file_handles(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data, max_open_files=256) as broker:
        client = admin(broker.bootstrap)
        huge = client.create_topics([NewTopic("huge", 100_000, 1)])["huge"]
        with pytest.raises(KafkaException) as refused:
            huge.result(30)
        assert error_code(refused.value) == INVALID_PARTITIONS
        grow = client.create_partitions([NewPartitions("huge", 2)])["huge"]
        with pytest.raises(KafkaException):
            grow.result(30)  # no such topic: nothing of it was made
        assert not list(data.glob("huge-*"))

        names = [f"wide-{i}" for i in range(TOPICS)]
        for future in client.create_topics([NewTopic(n, PER_TOPIC, 1) for n in names]).values():
            future.result(60)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, **QUIET})
        for n in names:
            for p in range(PER_TOPIC):
                producer.produce(n, value=f"{n}/{p}".encode(), partition=p)
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wide", **QUIET})
        consumer.assign([TopicPartition(n, p, 0) for n in names for p in range(PER_TOPIC)])
        got: set[str] = set()
        deadline = time.monotonic() + 60
        while len(got) < TOPICS * PER_TOPIC and time.monotonic() < deadline:
            got.update(m.value().decode() for m in consumer.consume(1000, 1) if not m.error())
        consumer.close()
        assert got == {f"{n}/{p}" for n in names for p in range(PER_TOPIC)}

        started = time.monotonic()
        assert broker.stop() == 0
        assert time.monotonic() - started < 20  # SIGTERM is quick
    assert "Too many open files" not in broker.log_path.read_text()
