"""Retry backoff (issue 35, `share.release.backoff.*`) with confluent-kafka's unchanged
ShareConsumer: a record it RELEASEs comes back after ~2 s, then ~4 s (initial 2000 ms,
multiplier 2), while records produced meanwhile flow; and a kill -9 of the broker while
records wait delivers none of them early after the restart, and loses none.

No Kafka release has this (KIP-1277's motivation asks for it); the shape is RabbitMQ's delayed
retry and NATS JetStream's BackOff. The release itself is KIP-932's (`AcknowledgeType.RELEASE`
in explicit acknowledgement mode).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import explicit_consumer
from tests.compat.support import fresh_names
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

BROKER_CONFIG = SHORT_SESSION_CONFIG
BACKOFF = {
    "share.auto.offset.reset": "earliest",
    "share.release.backoff.initial.ms": "2000",
    "share.release.backoff.multiplier": "2",
}


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(10) == 0


@pytest.mark.latency  # a time bound: run alone, not beside other tests
def test_a_released_record_comes_back_after_2_s_then_4_s_while_others_flow(
    broker: BrokerProcess,
) -> None:
    topic, group = fresh_names("backoff")
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(broker.bootstrap, group, BACKOFF)
    described = describe_group_configs(broker.bootstrap, group)
    assert described["share.release.backoff.initial.ms"] == "2000"
    assert described["share.release.backoff.max.ms"] == "60000"
    produce(broker.bootstrap, topic, [b"retry"])
    c = explicit_consumer(broker.bootstrap, group, topic)
    deliveries: list[float] = []  # when "retry" arrived, each time
    others: dict[bytes, float] = {}
    try:
        deadline = time.monotonic() + 30
        while len(deliveries) < 3 and time.monotonic() < deadline:
            for m in poll_records(c, 0.1):
                now = time.monotonic()
                if m.value() == b"retry":
                    deliveries.append(now)
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    others[m.value()] = now
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
            if len(deliveries) == 1 and not others:
                # Produced while "retry" waits: they must not wait behind it.
                produce(broker.bootstrap, topic, [b"other-%d" % i for i in range(5)])
                others[b"produced"] = time.monotonic()
        assert len(deliveries) == 3, deliveries
    finally:
        c.close()
    first_gap, second_gap = deliveries[1] - deliveries[0], deliveries[2] - deliveries[1]
    # Never before the wait (the broker starts it at the release, after the delivery), and
    # soon after it: the wake-up timer ticks every 50 ms (generous here for a loaded CI box).
    assert 2.0 <= first_gap < 2.6, first_gap
    assert 4.0 <= second_gap < 4.6, second_gap
    produced = others.pop(b"produced")
    assert sorted(others) == [b"other-%d" % i for i in range(5)]
    assert all(t < deliveries[1] for t in others.values())  # they flowed while it waited
    assert max(others.values()) - produced < 1.5


def test_kill_9_while_records_wait_delivers_none_early_and_loses_none(tmp_path: Path) -> None:
    """Ten records are released with a 15 s backoff and the broker is killed with SIGKILL at
    once: after the restart, a record produced then is delivered while they wait (the
    consumer is live), none of them comes back before 15 s from its release (the wait was
    written with the release, in the share-state records), and every one comes back."""
    wait_s = 15.0
    broker = start_broker(tmp_path / "data", SHORT_SESSION_CONFIG)
    topic, group = "backoff-crash", "backoff-crash-g"
    try:
        create_topic(broker.bootstrap, topic, 1)
        slow = {**BACKOFF, "share.release.backoff.initial.ms": str(int(wait_s * 1000))}
        set_group_configs(broker.bootstrap, group, slow)
        values = [b"r%d" % i for i in range(10)]
        produce(broker.bootstrap, topic, values)
        c = explicit_consumer(broker.bootstrap, group, topic)
        seen: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(seen) < 10 and time.monotonic() < deadline:
            for m in poll_records(c, 0.2):
                seen.append(m.value())
                c.acknowledge(m, AcknowledgeType.RELEASE)
        released_at = time.monotonic()  # before the broker stamps the release
        c.commit_sync(10)  # the release is durable once this returns
        assert sorted(seen) == values
        c.close()  # first: a consumer closing against a dead broker may take its timeouts
        broker.kill()
        broker = start_broker(tmp_path / "data", SHORT_SESSION_CONFIG)
        produce(broker.bootstrap, topic, [b"fresh"])
        c = explicit_consumer(broker.bootstrap, group, topic)
        again: dict[bytes, float] = {}
        try:
            deadline = time.monotonic() + 60
            while len(again) < 11 and time.monotonic() < deadline:
                for m in poll_records(c, 0.1):
                    again.setdefault(m.value(), time.monotonic())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync(10)
        finally:
            c.close()
        fresh = again.pop(b"fresh") - released_at
        assert fresh < wait_s, fresh  # the consumer was fetching while they waited
        assert sorted(again) == values  # none lost
        earliest = min(again.values()) - released_at
        assert earliest >= wait_s, (earliest, fresh)  # none early
    finally:
        broker.stop()
