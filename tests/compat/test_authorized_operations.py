"""Authorized operations through confluent-kafka's AdminClient (KIP-430).

Shoal has no authorizer yet, so like Kafka without one it reports every operation each
resource type supports, and nothing when the client does not ask.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation

from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

TOPIC_OPS = {
    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}  # fmt: skip
CLUSTER_OPS = {
    AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
    AclOperation.DESCRIBE,
}  # fmt: skip


def test_topics_and_cluster_report_every_supported_operation(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        create_topic(broker.bootstrap, "ops", 1)
        client = admin(broker.bootstrap)
        asked = client.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)
        topic = asked["ops"].result(10)
        plain = client.describe_topics(TopicCollection(["ops"]))["ops"].result(10)
        cluster = client.describe_cluster(include_authorized_operations=True).result(10)
        cluster_plain = client.describe_cluster().result(10)
    finally:
        broker.stop()
    assert set(topic.authorized_operations) == TOPIC_OPS
    assert set(cluster.authorized_operations) == CLUSTER_OPS
    assert not plain.authorized_operations and not cluster_plain.authorized_operations
