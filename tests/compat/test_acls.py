"""ACLs through confluent-kafka's real clients, over a real socket, on a broker process.

Until authentication lands every connection is `User:ANONYMOUS`, so the wire tests allow and
deny that principal. The broker starts with `allow.everyone.if.no.acl.found=true`, so a
resource with no ACL is open (the ACL APIs too, until the cluster gets an ACL of its own).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka.admin import AclBinding
from confluent_kafka.admin import AclBindingFilter
from confluent_kafka.admin import AclOperation
from confluent_kafka.admin import AclPermissionType
from confluent_kafka.admin import ResourcePatternType
from confluent_kafka.admin import ResourceType

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import error_code
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat
ANON = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
OPEN = {**AUTHORIZER, "allow.everyone.if.no.acl.found": "true", **SHORT_SESSION_CONFIG}
SECURITY_DISABLED, TOPIC_AUTHORIZATION_FAILED = 54, 29


BROKER_CONFIG = OPEN
BROKER_PER_TEST = True  # each test starts from an empty broker


def _binding(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    rtype: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    principal: str = ANON,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


ANY = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
    AclPermissionType.ANY,
)  # fmt: skip


def _create(bootstrap: str, *bindings: AclBinding) -> None:
    client = admin(bootstrap)
    for future in client.create_acls(list(bindings)).values():
        future.result(10)


def _described(bootstrap: str) -> set[tuple[str, str, str, str, str]]:
    client = admin(bootstrap)  # the future fails if its client is destroyed first
    found = client.describe_acls(ANY).result(10)
    return {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name,
         b.permission_type.name)
        for b in found
    }  # fmt: skip


def test_admin_client_creates_describes_and_deletes_acls_durably(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data, OPEN)
    try:
        _create(
            broker.bootstrap,
            _binding("orders", AclOperation.READ),
            _binding("pay", AclOperation.WRITE, AclPermissionType.DENY,
                     pattern=ResourcePatternType.PREFIXED),
            _binding("workers", AclOperation.READ, rtype=ResourceType.GROUP),
        )  # fmt: skip
        before = _described(broker.bootstrap)
    finally:
        broker.stop()
    broker = start_broker(data, OPEN)  # the same data dir: the ACLs come back
    try:
        after_restart = _described(broker.bootstrap)
        only_topics = AclBindingFilter(
            ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY,
        )  # fmt: skip
        client = admin(broker.bootstrap)
        deleted = client.delete_acls([only_topics])[only_topics].result(10)
        remaining = _described(broker.bootstrap)
    finally:
        broker.stop()
    assert before == {
        ("TOPIC", "orders", "LITERAL", "READ", "ALLOW"),
        ("TOPIC", "pay", "PREFIXED", "WRITE", "DENY"),
        ("GROUP", "workers", "LITERAL", "READ", "ALLOW"),
    }
    assert after_restart == before
    assert sorted(b.name for b in deleted) == ["orders", "pay"]
    assert remaining == {("GROUP", "workers", "LITERAL", "READ", "ALLOW")}


def test_acl_apis_answer_security_disabled_without_an_authorizer(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data")
    try:
        with pytest.raises(KafkaException) as refused:
            _create(broker.bootstrap, _binding("orders", AclOperation.READ))
    finally:
        broker.stop()
    assert error_code(refused.value) == SECURITY_DISABLED


def _produce(bootstrap: str, topic: str) -> int:
    """Produce one record; the delivery's error code (0: delivered)."""
    results: list[int] = []

    def done(err: KafkaError | None, _msg: object) -> None:
        results.append(0 if err is None else int(err.code()))

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000, **QUIET})
    producer.produce(topic, b"v", on_delivery=done)
    producer.flush(15)
    return results[0] if results else -1


def test_a_deny_beats_an_allow_for_the_producer(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "payments", 1)
    _create(
        broker.bootstrap,
        _binding("payments", AclOperation.WRITE),
        _binding("pay", AclOperation.WRITE, AclPermissionType.DENY,
                 pattern=ResourcePatternType.PREFIXED),
    )  # fmt: skip
    denied = _produce(broker.bootstrap, "payments")
    deny = AclBindingFilter(
        ResourceType.TOPIC, "pay", ResourcePatternType.PREFIXED, ANON, "*", AclOperation.WRITE,
        AclPermissionType.DENY,
    )  # fmt: skip
    client = admin(broker.bootstrap)
    client.delete_acls([deny])[deny].result(10)
    allowed = _produce(broker.bootstrap, "payments")
    assert (denied, allowed) == (TOPIC_AUTHORIZATION_FAILED, 0)


def _consume(bootstrap: str, group: str, seconds: float) -> tuple[int, set[int]]:
    """(records received, error codes seen) by a share consumer polling for `seconds`."""
    consumer = share_consumer(bootstrap, group)
    consumer.subscribe(["jobs"])
    received, errors = 0, set()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not received:
            try:
                received += len(poll_records(consumer, 0.5))
            except (KafkaException, AssertionError) as e:  # an error surfaced by poll
                errors.add(error_code(e) if isinstance(e, KafkaException) else -1)
    finally:
        consumer.close()
    return received, errors


def test_a_share_consumer_without_read_on_the_group_receives_nothing(
    broker: BrokerProcess,
) -> None:
    create_topic(broker.bootstrap, "jobs", 1)
    # Records produced before the consumer joins are delivered (set while the group is open).
    set_group_configs(broker.bootstrap, "workers", {"share.auto.offset.reset": "earliest"})
    _create(
        broker.bootstrap,
        _binding("jobs", AclOperation.READ),
        _binding("jobs", AclOperation.WRITE),
        # An ACL on the group for someone else: the group is no longer open to everyone.
        _binding("workers", AclOperation.READ, rtype=ResourceType.GROUP, principal="User:other"),
    )
    assert _produce(broker.bootstrap, "jobs") == 0
    refused, _ = _consume(broker.bootstrap, "workers", 8)
    _create(broker.bootstrap, _binding("workers", AclOperation.READ, rtype=ResourceType.GROUP))
    assert _produce(broker.bootstrap, "jobs") == 0
    allowed, _ = _consume(broker.bootstrap, "workers", 20)
    assert refused == 0
    assert allowed > 0
