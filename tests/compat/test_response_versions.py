"""Responses to older versions carry no stray tagged fields.

librdkafka 2.16 sends Produce v10. Answered with v12's classes, every partition response
carried the tagged `current_leader` as leader -1 (an entity of another version's class never
equals the v10 default, so kio wrote it), and the producer logged "new leader-1 not found in
cache" for every response. The registry now refuses such a declaration (unit-tested in
tests/unit/test_response_families.py); this is what a client saw.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition

from tests.brokers import BrokerProcess
from tests.compat.support import create_topic

pytestmark = pytest.mark.compat


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_producer_and_consumer_log_no_leader_change(tmp_path: Path) -> None:
    lines = _Lines()
    logger = logging.getLogger("librdkafka-response-versions")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    with BrokerProcess(tmp_path / "data") as broker:
        create_topic(broker.bootstrap, "t", 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}, logger=logger)
        for i in range(20):
            producer.produce("t", value=b"v%d" % i, partition=i % 2)
            producer.flush(10)
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "rv", "enable.auto.commit": False},
            logger=logger,
        )
        consumer.assign([TopicPartition("t", p, 0) for p in (0, 1)])
        got = consumer.consume(20, timeout=10)
        consumer.close()
    assert len(got) == 20 and not any(m.error() for m in got)
    leader_lines = [line for line in lines.lines if "leader" in line.lower()]
    assert leader_lines == [], leader_lines[:3]
