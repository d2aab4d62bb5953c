"""CreateTopics through confluent-kafka's AdminClient: manual replica assignments, and one
validation of topic config names shared with IncrementalAlterConfigs."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import ResourceType

from tests.compat.support import admin
from tests.compat.support import error_code
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat
INVALID_CONFIG, INVALID_REPLICA_ASSIGNMENT = 40, 39


def _create_error(client: AdminClient, topic: NewTopic, validate_only: bool = False) -> int:
    future = client.create_topics([topic], validate_only=validate_only)[topic.topic]
    try:
        future.result(10)
    except KafkaException as e:
        return error_code(e)
    return 0


def test_assignments_and_config_names(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        client = admin(broker.bootstrap)
        assigned = NewTopic("assigned", 3, replica_assignment=[[1], [1], [1]])
        made = _create_error(client, assigned)
        partitions = (
            client.describe_topics(TopicCollection(["assigned"]))["assigned"].result(10).partitions
        )
        elsewhere = _create_error(client, NewTopic("elsewhere", 1, replica_assignment=[[2]]))
        unknown = {"dummy.doesntexist": "x"}
        bad_name = _create_error(client, NewTopic("bad-config", 1, config=unknown))
        bad_name_dry = _create_error(client, NewTopic("bad-config", 1, config=unknown), True)
        bad_value = _create_error(client, NewTopic("bad-value", 1, config={"retention.ms": "x"}))
        stored = _create_error(client, NewTopic("stored", 1, config={"cleanup.policy": "delete"}))
        alter = ConfigResource(
            ResourceType.TOPIC, "stored",
            incremental_configs=[ConfigEntry("dummy.doesntexist", "x",
                                             incremental_operation=AlterConfigOpType.SET)],
        )  # fmt: skip
        with pytest.raises(KafkaException) as altered:
            client.incremental_alter_configs([alter])[alter].result(10)
        listed = set(client.list_topics(timeout=10).topics)
    finally:
        broker.stop()
    assert (made, len(partitions)) == (0, 3)
    assert elsewhere == INVALID_REPLICA_ASSIGNMENT
    assert (bad_name, bad_name_dry, bad_value, stored) == (INVALID_CONFIG,) * 3 + (0,)
    assert error_code(altered.value) == INVALID_CONFIG
    assert {"bad-config", "bad-value", "elsewhere"}.isdisjoint(listed)
