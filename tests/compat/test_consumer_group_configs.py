"""KIP-848 group configs with confluent-kafka: an AdminClient sets `consumer.session.timeout.ms`
and `consumer.heartbeat.interval.ms` on a group, and its `group.protocol=consumer` members live
by them.

Kafka 4.1 and 4.2 list these two consumer-group configs in `GroupConfig`
(group-coordinator/.../GroupConfig.java; `consumer.assignment.interval.ms` comes only in 4.3),
each bounded by the broker's `group.consumer.min/max.*` when set (`validateValues`: out of
bounds is INVALID_CONFIG) and read per group at each heartbeat by `GroupMetadataManager`.
DescribeConfigs lists them for any group, an unset one with its broker default and that
setting's source (`ConfigHelper.createGroupConfigEntry`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import ConfigSource

from tests.brokers import BrokerProcess
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import set_group_configs

pytestmark = pytest.mark.compat

TOPIC, GROUP, PARTITIONS = "ledger", "tuned", 4
BROKER_SESSION_MS = 30_000  # what a member of a group without its own configs gets
CONFIG = {
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.session.timeout.ms": BROKER_SESSION_MS,
    "group.consumer.min.heartbeat.interval.ms": 500,
}
GROUP_SESSION_MS = 3000


BROKER_CONFIG = CONFIG
BROKER_PER_TEST = True  # each test starts from an empty broker


def _described(bootstrap: str, group: str) -> dict[str, tuple[str | None, ConfigSource]]:
    resource = ConfigResource("group", group)
    client = admin(bootstrap)  # its futures fail once it is gone
    entries = client.describe_configs([resource])[resource].result(10)
    return {name: (e.value, ConfigSource(e.source)) for name, e in entries.items()}


def _members(bootstrap: str) -> int:
    client = admin(bootstrap)
    try:
        group = client.describe_consumer_groups([GROUP])[GROUP].result(10)
    except KafkaException:  # GROUP_ID_NOT_FOUND until the first member joins
        return 0
    return len(group.members)


def _wait_members(bootstrap: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _members(bootstrap) != count:
        assert time.monotonic() < deadline, f"not {count} members in {timeout} s"
        time.sleep(0.1)


def test_group_configs_are_set_described_bounded_and_obeyed(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    b = broker.bootstrap
    create_topic(b, TOPIC, PARTITIONS)
    with pytest.raises(KafkaException) as refused:  # below group.consumer.min.session...
        set_group_configs(b, GROUP, {"consumer.session.timeout.ms": "999"})
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    session, heartbeat = str(GROUP_SESSION_MS), "500"
    set_group_configs(
        b,
        GROUP,
        {"consumer.session.timeout.ms": session, "consumer.heartbeat.interval.ms": heartbeat},
    )
    configs = _described(b, GROUP)
    assert configs["consumer.session.timeout.ms"] == (session, ConfigSource.GROUP_CONFIG)
    assert configs["consumer.heartbeat.interval.ms"] == (heartbeat, ConfigSource.GROUP_CONFIG)
    other = _described(b, "untuned")  # the broker's: set in its file, or Kafka's default
    assert other["consumer.session.timeout.ms"] == (
        str(BROKER_SESSION_MS),
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert other["consumer.heartbeat.interval.ms"] == ("5000", ConfigSource.DEFAULT_CONFIG)

    worker = [sys.executable, "-m", "tests.compat.consumer_worker", b, GROUP, TOPIC]
    workers = [subprocess.Popen([*worker, str(tmp_path / f"worker{i}.txt")]) for i in range(2)]
    try:
        _wait_members(b, 2, 60)
        workers[0].kill()  # no leave, no more heartbeats: only the session timeout ends it
        workers[0].wait(10)
        killed_at = time.monotonic()
        _wait_members(b, 1, BROKER_SESSION_MS / 1000)
        gone_after = time.monotonic() - killed_at
        # The group's 3 s (from its last heartbeat, at most 0.5 s before the kill), not 30 s.
        assert GROUP_SESSION_MS / 1000 - 1 <= gone_after < BROKER_SESSION_MS / 1000 / 2
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
                try:
                    w.wait(15)
                except subprocess.TimeoutExpired:
                    w.kill()
                    w.wait(10)
