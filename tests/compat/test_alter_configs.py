"""AlterConfigs (33), the non-incremental API, through confluent-kafka's AdminClient: a
resource's configs are replaced as a whole, with IncrementalAlterConfigs' validation."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import ResourceType

from tests.compat.support import admin
from tests.compat.support import error_code
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat
INVALID_CONFIG = 40


def _alter(client: AdminClient, resource: ConfigResource) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # confluent-kafka deprecates it
        future = client.alter_configs([resource])[resource]
    try:
        future.result(10)
    except KafkaException as e:
        return error_code(e)
    return 0


def _set_configs(client: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = client.describe_configs([resource])[resource].result(10)
    return {n: e.value for n, e in entries.items() if not e.is_default}


def test_alter_configs_replaces_a_topics_configs(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        client = admin(broker.bootstrap)
        configs = {"retention.ms": "1000", "cleanup.policy": "delete"}
        client.create_topics([NewTopic("t", 1, config=configs)])["t"].result(10)
        before = _set_configs(client, "t")
        replaced = _alter(
            client, ConfigResource(ResourceType.TOPIC, "t", set_config={"segment.ms": "60000"})
        )
        after = _set_configs(client, "t")
        unknown = _alter(
            client, ConfigResource(ResourceType.TOPIC, "t", set_config={"dummy.doesntexist": "x"})
        )
        still = _set_configs(client, "t")
    finally:
        broker.stop()
    assert before == configs
    assert (replaced, after) == (0, {"segment.ms": "60000"})
    assert (unknown, still) == (INVALID_CONFIG, after)
