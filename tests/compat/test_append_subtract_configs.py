"""APPEND and SUBTRACT on list configs through confluent-kafka's IncrementalAlterConfigs.

A topic's `cleanup.policy` is a comma-separated list: APPEND adds the values not already in it
(starting from the default `delete`), SUBTRACT removes the ones given. On a config that is not
a list they are refused with INVALID_CONFIG, and so is a value that is not a cleanup policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
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
INVALID_CONFIG = 40
APPEND, SUBTRACT, SET = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT, AlterConfigOpType.SET


def _op(client: AdminClient, op: AlterConfigOpType, name: str, value: str) -> int:
    entry = ConfigEntry(name, value, incremental_operation=op)
    resource = ConfigResource(ResourceType.TOPIC, "t", incremental_configs=[entry])
    try:
        client.incremental_alter_configs([resource])[resource].result(10)
    except KafkaException as e:
        return error_code(e)
    return 0


def _policy(client: AdminClient) -> str | None:
    resource = ConfigResource(ResourceType.TOPIC, "t")
    entries = client.describe_configs([resource])[resource].result(10)
    return entries["cleanup.policy"].value if "cleanup.policy" in entries else None


def test_append_and_subtract_on_cleanup_policy(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        client = admin(broker.bootstrap)
        client.create_topics([NewTopic("t", 1)])["t"].result(10)
        steps = []
        for op, value in (
            (APPEND, "compact"),  # onto the default: delete,compact
            (APPEND, "compact"),  # already there
            (SUBTRACT, "delete"),
            (APPEND, "delete"),
            (SUBTRACT, "compact,delete,compact"),  # nothing left: refused
        ):
            steps.append((_op(client, op, "cleanup.policy", value), _policy(client)))
        refused = {
            "append to a number": _op(client, APPEND, "retention.ms", "1000"),
            "subtract from a number": _op(client, SUBTRACT, "retention.ms", "1000"),
            "append a bad policy": _op(client, APPEND, "cleanup.policy", "shred"),
            "set a bad policy": _op(client, SET, "cleanup.policy", "delete,shred"),
        }
        bad_topic = client.create_topics([NewTopic("u", 1, config={"cleanup.policy": "x"})])["u"]
        with pytest.raises(KafkaException) as not_created:
            bad_topic.result(10)
        final = _policy(client)
    finally:
        broker.stop()
    assert steps == [
        (0, "delete,compact"),
        (0, "delete,compact"),
        (0, "compact"),
        (0, "compact,delete"),
        (INVALID_CONFIG, "compact,delete"),
    ]
    assert refused == dict.fromkeys(refused, INVALID_CONFIG)
    assert error_code(not_created.value) == INVALID_CONFIG
    assert final == "compact,delete"
