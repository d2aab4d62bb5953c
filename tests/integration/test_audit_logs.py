"""Operator actions and share-state events in a real broker's log lines, with who did them.

Destructive and operator actions name the client id, principal and address (host:port) that
asked, and ACL changes the bindings themselves; lock expiries
and archivals name the topic and the member that held the records; session-timeout leaves and
unsupported-version lines carry the client id; unknown names in the properties file and the
SHOAL_* environment are reported at start in one warning.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
import structlog
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewPartitions
from confluent_kafka.admin import NewTopic

from broker.server import Server
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import ShareConsumer
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from protocol.framing import frame
from tests.brokers import BrokerProcess
from tests.clock import ManualClock
from tests.probe import read_frame

pytestmark = pytest.mark.integration


def _lines(proc: BrokerProcess) -> list[dict[str, Any]]:
    text = proc.log_path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _one(lines: list[dict[str, Any]], event: str, **fields: object) -> dict[str, Any]:
    found = [
        r for r in lines if r["event"] == event and all(r.get(k) == v for k, v in fields.items())
    ]
    assert len(found) == 1, (event, fields, [r for r in lines if r["event"] == event])
    return found[0]


def _wait(futures: dict[Any, Any]) -> None:
    for future in futures.values():
        future.result(15)


async def _share_admin(bootstrap: str) -> None:
    async with Admin(bootstrap, client_id="ops-share-admin") as admin:
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "audit", {"share.auto.offset.reset": "earliest"}
        )
        await admin.alter_share_group_offsets("audit", {("orders", 0): 1})
        await admin.delete_share_group_offsets("audit", ["orders"])
        await admin.delete_groups(["audit"])


def test_operator_actions_are_logged_with_who_asked(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=1\nlog.retention.hourz=5\n")
    env = {"SHOAL_NUM_PARTITIONZ": "3", "SHOAL_LOOP": "asyncio"}
    with BrokerProcess(tmp_path / "data", extra=["--config", str(properties)], env=env) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap, "client.id": "ops-admin"})
        _wait(admin.create_topics([NewTopic("orders", 1, 1)]))
        producer = KafkaProducer({"bootstrap.servers": proc.bootstrap, "client.id": "ops-prod"})
        producer.produce("auto-made", b"x")
        assert producer.flush(15) == 0
        _wait(admin.create_partitions([NewPartitions("orders", 2)]))
        resource = ConfigResource(
            "topic", "orders",
            incremental_configs=[
                ConfigEntry("retention.ms", "60000",
                            incremental_operation=AlterConfigOpType.SET),
            ],
        )  # fmt: skip
        _wait(admin.incremental_alter_configs([resource]))
        asyncio.run(_share_admin(proc.bootstrap))
        _wait(admin.delete_topics(["auto-made"]))
        proc.stop()
        lines = _lines(proc)

    warning = _one(lines, "supplied but isn't a known config")
    assert warning["names"] == ["log.retention.hourz"]
    assert warning["environment"] == ["SHOAL_NUM_PARTITIONZ"]  # SHOAL_LOOP is read elsewhere
    created = _one(lines, "topic created", topic="orders")
    assert created["client_id"] == "ops-admin" and created["principal"] == "User:ANONYMOUS"
    _from_a_client(created)
    auto = _one(lines, "topic created", topic="auto-made")
    assert auto["auto"] is True and auto["client_id"] == "ops-prod"
    assert _one(lines, "partitions added", topic="orders")["partitions"] == 2
    altered = _one(lines, "configs altered", resource="orders")
    assert altered["set"] == {"retention.ms": "60000"} and altered["client_id"] == "ops-admin"
    group = _one(lines, "configs altered", resource="audit")
    assert group["resource_type"] == "group" and group["client_id"] == "ops-share-admin"
    reset = _one(lines, "share group offset reset", group="audit")
    assert (reset["topic"], reset["partition"], reset["start_offset"]) == ("orders", 0, 1)
    assert _one(lines, "share group offsets deleted", group="audit")["topic"] == "orders"
    assert _one(lines, "group deleted", group="audit")["client_id"] == "ops-share-admin"
    deleted = _one(lines, "topic deleted", topic="auto-made")
    assert deleted["client_id"] == "ops-admin" and deleted["principal"] == "User:ANONYMOUS"
    for line in (deleted, altered, group, reset):
        _from_a_client(line)


def _from_a_client(line: dict[str, Any]) -> None:
    """On plaintext every principal is User:ANONYMOUS: the line says which client (host:port)."""
    host, _, port = line["peer"].rpartition(":")
    assert host == "127.0.0.1" and port.isdigit(), line


async def _acl_changes(bootstrap: str) -> None:
    async with Admin(bootstrap, client_id="ops-acl-admin") as admin:
        await admin.create_acls([READ_ORDERS, DENY_BOB])
        await admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.ANY,
                                                  None, None, AclOperation.ANY,
                                                  AclPermissionType.ANY)])  # fmt: skip


READ_ORDERS = AclBinding(
    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
)
DENY_BOB = AclBinding(
    ResourcePattern(ResourceType.GROUP, "pay", PatternType.PREFIXED),
    AccessControlEntry("User:bob", "10.0.0.1", AclOperation.ALL, AclPermissionType.DENY),
)


def test_acl_changes_log_the_bindings_and_the_client_address(tmp_path: Path) -> None:
    """Each ACL added or removed is on the line in full (resource, pattern, principal, host,
    operation, permission), with the client's host:port, not only a count."""
    properties = tmp_path / "server.properties"
    properties.write_text(
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "allow.everyone.if.no.acl.found=true\n"
    )
    with BrokerProcess(tmp_path / "data", extra=["--config", str(properties)]) as proc:
        asyncio.run(_acl_changes(proc.bootstrap))
        proc.stop()
        lines = _lines(proc)
    created = _one(lines, "acls created")
    assert created["acls"] == [READ_ORDERS.fields(), DENY_BOB.fields()], created
    assert created["acls"][1] == {
        "resource_type": "GROUP", "name": "pay", "pattern_type": "PREFIXED",
        "principal": "User:bob", "host": "10.0.0.1", "operation": "ALL", "permission": "DENY",
    }  # fmt: skip
    deleted = _one(lines, "acls deleted")
    assert deleted["acls"] == [READ_ORDERS.fields()], deleted
    for line in (created, deleted):
        assert line["client_id"] == "ops-acl-admin"
        _from_a_client(line)


def test_unsupported_versions_are_logged_with_the_client_id(tmp_path: Path) -> None:
    def send(port: int, key: int, client_id: bytes) -> bytes | None:
        """A header (key, version 99, correlation id 7, client id) and no body."""
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(frame(struct.pack(">hhih", key, 99, 7, len(client_id)) + client_id))
            try:
                return read_frame(sock)
            except AssertionError:  # closed: no Metadata response can carry the error
                return None

    with BrokerProcess(tmp_path / "data") as proc:
        assert send(proc.port, 18, b"too-new-client") is not None  # ApiVersions: answered v0
        assert send(proc.port, 3, b"odd-client") is None
        proc.stop()
        lines = _lines(proc)
    answered = _one(lines, "unsupported version", api_key=18)
    assert answered["client_id"] == "too-new-client" and answered["correlation_id"] == 7
    assert _one(lines, "unsupported version", api_key=3)["client_id"] == "odd-client"


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"group.share.min.session.timeout.ms": 1000, "group.share.session.timeout.ms": 1500}


async def test_lock_expiry_archival_and_session_timeout_lines_say_whose(
    broker: Server, clock: ManualClock
) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("jobs", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "workers",
            {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000",
             "share.delivery.count.limit": "2"},
        )  # fmt: skip
    async with Producer(bootstrap) as producer:
        await producer.send("jobs", b"poison", partition=0)
    consumer = ShareConsumer(
        bootstrap, "workers", acknowledgement_mode="explicit", client_id="slow-worker"
    )
    await consumer.__aenter__()
    consumer.subscribe(["jobs"])
    with structlog.testing.capture_logs() as logs:
        for _ in range(2):  # taken twice and never acknowledged: at the limit of 2, archived
            got = []
            for _ in range(40):
                got += await consumer.poll(0.5)
                if got:
                    break
            assert got
            clock.advance(1000)  # the lock expires
        member = consumer.member_id
        await consumer.cluster.close()  # gone without a word, as a crashed worker is
        clock.advance(1500)  # its session times out

    expired = [r for r in logs if r["event"] == "acquisition locks expired"]
    assert len(expired) == 2 and {r["topic"] for r in expired} == {"jobs"}
    assert all(r["members"] == [member] for r in expired)
    archived = [r for r in logs if r["event"] == "records archived at the delivery-count limit"]
    assert archived and archived[0]["topic"] == "jobs" and archived[0]["members"] == [member]
    left = [r for r in logs if r["event"] == "member left" and r["reason"] == "session timeout"]
    assert left and left[0]["client_id"] == "slow-worker", logs
