"""Scheduled delivery (issue 35, topic config `shoal.scheduled.delivery.enable`) with
confluent-kafka's unchanged Producer and ShareConsumer: a record produced with the header
`shoal.deliver.at.ms` reaches the share group within 100 ms after its time and not before,
while the records produced around it flow; a plain Consumer sees it in offset order at once;
and a kill -9 of the broker while it waits delivers it neither early nor never.

No Kafka release has this (ApsaraMQ's FAQ: no delayed messages "because of an Apache Kafka
protocol limitation"); Pulsar's deliverAt and NATS's scheduled messages are the anchors.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import explicit_consumer
from tests.compat.support import fresh_names
from tests.compat.support import poll_records
from tests.compat.support import read_partition
from tests.compat.support import set_group_configs
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

BROKER_CONFIG = SHORT_SESSION_CONFIG
ENABLE = "shoal.scheduled.delivery.enable"
HEADER = "shoal.deliver.at.ms"


def scheduled_topic(bootstrap: str, name: str) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(name, 1, 1, config={ENABLE: "true"})])[name].result(10)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, int | None]]) -> None:
    """(value, delivery time in epoch ms or None) each, in order."""
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for value, at in records:
        headers = [(HEADER, str(at).encode())] if at is not None else None
        p.produce(topic, value=value, headers=headers)
    assert p.flush(10) == 0


def consume(
    bootstrap: str, group: str, topic: str, count: int, timeout: float
) -> dict[bytes, float]:
    """value -> when it arrived (epoch seconds), for the first `count` records, each
    accepted and committed (so a restart does not deliver it again)."""
    c = explicit_consumer(bootstrap, group, topic)
    got: dict[bytes, float] = {}
    try:
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            records = poll_records(c, 0.05)
            for m in records:
                got.setdefault(m.value(), time.time())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if records:
                c.commit_sync(10)
    finally:
        c.close()
    return got


@pytest.mark.latency  # a time bound: run alone, not beside other tests
def test_a_scheduled_record_arrives_within_100_ms_after_its_time_and_others_flow(
    broker: BrokerProcess,
) -> None:
    topic, group = fresh_names("sched")
    scheduled_topic(broker.bootstrap, topic)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    due_ms = int(time.time() * 1000) + 4000
    produce(broker.bootstrap, topic, [(b"before", None), (b"later", due_ms), (b"after", None)])
    got = consume(broker.bootstrap, group, topic, 3, timeout=30)
    assert sorted(got) == [b"after", b"before", b"later"]
    assert got[b"before"] * 1000 < due_ms and got[b"after"] * 1000 < due_ms  # they flowed
    late_ms = got[b"later"] * 1000 - due_ms
    assert 0 <= late_ms <= 100, late_ms
    # A plain consumer reads the log in offset order, as always, schedule or not.
    assert read_partition(broker.bootstrap, topic) == [b"before", b"later", b"after"]


def test_kill_9_while_a_scheduled_record_waits_delivers_it_on_time(tmp_path: Path) -> None:
    """The schedule is the record's header, read again after a restart: killed with SIGKILL
    while the record waits (inside the group's window, the records around it delivered and
    acknowledged), the broker delivers it not before its time, and delivers it."""
    broker = start_broker(tmp_path / "data", SHORT_SESSION_CONFIG)
    topic, group = "sched-crash", "sched-crash-g"
    try:
        scheduled_topic(broker.bootstrap, topic)
        set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
        due_ms = int(time.time() * 1000) + 15_000
        produce(broker.bootstrap, topic, [(b"a", None), (b"later", due_ms), (b"b", None)])
        first = consume(broker.bootstrap, group, topic, 2, timeout=20)
        assert sorted(first) == [b"a", b"b"]
        broker.kill()
        broker = start_broker(tmp_path / "data", SHORT_SESSION_CONFIG)
        produce(broker.bootstrap, topic, [(b"fresh", None)])
        got = consume(broker.bootstrap, group, topic, 2, timeout=40)
        assert sorted(got) == [b"fresh", b"later"]  # not lost; a, b not again
        assert got[b"fresh"] * 1000 < due_ms  # the group was fetching while it waited
        assert got[b"later"] * 1000 >= due_ms  # not early
    finally:
        broker.stop()
