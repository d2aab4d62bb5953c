"""kcat's balanced consumer (`kcat -G`, librdkafka's subscribe) reads a topic with a group.

Skipped when kcat is not installed (Debian package `kcat`).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import create_topic

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]


BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 100}
BROKER_PER_TEST = True  # each test starts from an empty broker


def test_kcat_balanced_consumer_reads_every_record(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "kcat-topic", 2)
    values = [f"kcat-{i}" for i in range(20)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for i, value in enumerate(values):
        producer.produce("kcat-topic", value=value.encode(), partition=i % 2)
    assert producer.flush(10) == 0
    # -e: exit once every assigned partition has reached its end.
    run = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-G", "kcat-group", "-o", "beginning", "-e", "-q",
         "-f", "%s\\n", "-X", "enable.auto.commit=false", "kcat-topic"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert sorted(run.stdout.split()) == sorted(values)
