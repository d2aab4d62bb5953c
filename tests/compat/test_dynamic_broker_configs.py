"""Dynamic cluster-wide log configs through confluent-kafka's AdminClient (KIP-226).

`log.retention.ms` set on the broker resource is described back with its source, reaches the
logs of existing topics at once (a topic without its own retention loses its old segments, one
with its own keeps them), and survives a restart. A broker config that is not dynamic and an
unknown name are refused as Kafka refuses them.

librdkafka refuses a broker resource with an empty name (the cluster default) before sending
anything ("Invalid ConfigResource"), so these tests name the node (Shoal's `node.id`, 1);
`tests/integration/test_admin_configs.py` covers "" with Shoal's own client.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import ConfigSource
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import OffsetSpec
from confluent_kafka.admin import ResourceType

from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import error_code
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

INVALID_CONFIG, INVALID_REQUEST = 40, 42
WEEK_MS = str(7 * 24 * 3600 * 1000)
# Small segments, and retention checked often: old segments go within a second of a change.
STATIC = {"log.segment.bytes": 1024, "log.retention.check.interval.ms": 200}
RECORDS = 30


def _set(client: AdminClient, node: str, configs: dict[str, str], dry: bool = False) -> int:
    """IncrementalAlterConfigs SET on the broker resource `node`; the error code (0: done)."""
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=entries)
    try:
        client.incremental_alter_configs([resource], validate_only=dry)[resource].result(10)
    except KafkaException as e:
        return error_code(e)
    return 0


def _describe(client: AdminClient, kind: ResourceType, name: str, key: str) -> tuple[str, int]:
    resource = ConfigResource(kind, name)
    entry = client.describe_configs([resource])[resource].result(10)[key]
    return entry.value, entry.source


def _earliest(client: AdminClient, topic: str) -> int:
    tp = TopicPartition(topic, 0)
    return int(client.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset)


def _produce_old_records(bootstrap: str, topics: list[str]) -> None:
    """Records stamped an hour ago, one batch each: many small segments per topic."""
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    old = int(time.time() * 1000) - 3_600_000
    for i in range(RECORDS):
        for topic in topics:
            p.produce(topic, value=b"x" * 200, partition=0, timestamp=old + i)
        assert p.flush(10) == 0


def test_log_retention_ms_is_a_dynamic_cluster_default(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", STATIC)
    try:
        client = admin(broker.bootstrap)
        topics = {"follows": NewTopic("follows", 1), "keeps": NewTopic("keeps", 1)}
        topics["keeps"] = NewTopic("keeps", 1, config={"retention.ms": WEEK_MS})
        for future in client.create_topics(list(topics.values())).values():
            future.result(10)
        _produce_old_records(broker.bootstrap, list(topics))
        before = {t: _earliest(client, t) for t in topics}

        # validate_only checks without changing anything.
        assert _set(client, "1", {"log.retention.ms": "60000"}, dry=True) == 0
        assert _describe(client, ResourceType.BROKER, "1", "log.retention.ms") == (
            WEEK_MS,
            ConfigSource.DEFAULT_CONFIG.value,
        )
        assert _set(client, "1", {"log.retention.ms": "60000"}) == 0
        described = {
            "broker": _describe(client, ResourceType.BROKER, "1", "log.retention.ms"),
            "follows": _describe(client, ResourceType.TOPIC, "follows", "retention.ms"),
            "keeps": _describe(client, ResourceType.TOPIC, "keeps", "retention.ms"),
        }
        deadline = time.monotonic() + 15
        while _earliest(client, "follows") == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        after = {t: _earliest(client, t) for t in topics}

        # A second change (librdkafka sends a broker resource to the broker of that id, so
        # another id is never answered by Shoal: the integration tests cover it).
        assert _set(client, "1", {"log.retention.ms": "120000"}) == 0

        refused = {
            "listeners": _set(client, "1", {"listeners": "PLAINTEXT://127.0.0.1:1"}),
            "log.dirs": _set(client, "1", {"log.dirs": "/elsewhere"}),
            "unknown": _set(client, "1", {"log.no.such.config": "1"}),
            "bad value": _set(client, "1", {"log.retention.ms": "soon"}),
            "below -1": _set(client, "1", {"log.retention.ms": "-2"}),
        }

        assert broker.stop() == 0, broker.log()
        broker.start()
        client = admin(broker.bootstrap)
        restarted = {
            "broker": _describe(client, ResourceType.BROKER, "1", "log.retention.ms"),
            "follows": _describe(client, ResourceType.TOPIC, "follows", "retention.ms"),
            "keeps": _describe(client, ResourceType.TOPIC, "keeps", "retention.ms"),
        }
        kept_after_restart = _earliest(client, "keeps")
    finally:
        broker.stop()

    # Described on the node: its dynamic value; a topic follows it as the cluster's default.
    dynamic_broker = ConfigSource.DYNAMIC_BROKER_CONFIG.value
    dynamic_default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    own = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert before == {"follows": 0, "keeps": 0}
    assert described == {
        "broker": ("60000", dynamic_broker),
        "follows": ("60000", dynamic_default),
        "keeps": (WEEK_MS, own),
    }
    assert after["follows"] > 0, "the topic without its own retention kept its old segments"
    assert after["keeps"] == 0
    assert refused == {
        "listeners": INVALID_REQUEST,
        "log.dirs": INVALID_REQUEST,
        "unknown": INVALID_CONFIG,
        "bad value": INVALID_CONFIG,
        "below -1": INVALID_CONFIG,
    }
    assert restarted == {
        "broker": ("120000", dynamic_broker),
        "follows": ("120000", dynamic_default),
        "keeps": (WEEK_MS, own),
    }
    assert kept_after_restart == 0


def test_alter_configs_replaces_the_dynamic_broker_configs(tmp_path: Path) -> None:
    """AlterConfigs (33): the broker resource's dynamic configs replaced as a whole."""
    broker = start_broker(tmp_path / "data")
    try:
        client = admin(broker.bootstrap)
        client.create_topics([NewTopic("t", 1)])["t"].result(10)
        assert _set(client, "1", {"log.retention.ms": "60000", "log.roll.ms": "600000"}) == 0
        resource = ConfigResource(ResourceType.BROKER, "1", set_config={"log.roll.ms": "900000"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # confluent-kafka deprecates it
            client.alter_configs([resource])[resource].result(10)
        retention = _describe(client, ResourceType.BROKER, "1", "log.retention.ms")
        roll = _describe(client, ResourceType.BROKER, "1", "log.roll.ms")
        segment_ms = _describe(client, ResourceType.TOPIC, "t", "segment.ms")
    finally:
        broker.stop()
    assert retention == (WEEK_MS, ConfigSource.DEFAULT_CONFIG.value)
    assert roll == ("900000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert segment_ms == ("900000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
