"""`shoal serve --processes 2` whose only listener is SSL, or SASL_SSL (issue 33).

The processes send each other requests (transaction verification and markers, topic
auto-creation forwarded to node 0, share-state RPCs, CreateAcls forwarded to node 0) on the
inter-node listener; here the only one speaks TLS, so they connect over TLS with the listener's
own keystore and truststore, as Kafka's brokers open their inter-broker connections with the
inter-broker listener's `ssl.*` settings (`TransactionMarkerChannelManager`:
`ChannelBuilders.clientChannelBuilder(interBrokerSecurityProtocol, ..., interBrokerListenerName)`),
checking the other's host name (`ssl.endpoint.identification.algorithm`, `https` by default in
`SslConfigs`). The certificates are the TLS tests' (`tests/tls_files.py`: a CA, a server
certificate for 127.0.0.1 and localhost, a client certificate for alice).

SSL: `ssl.client.auth=required`, so each node shows the keystore's certificate and is its
subject's principal, listed in `super.users` beside alice's, as Kafka's operators list the
broker certificate's DN. SASL_SSL: the nodes log in as their reserved user over TLS, a super
user of the authorizer; the clients as admin. Every check reads back what the nodes did.
Every test failed before: the supervisor refused an SSL or SASL_SSL inter-node listener.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic
from cryptography import x509
from kio.schema.create_acls import v3 as create_acls
from kio.schema.describe_acls import v3 as describe_acls
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata
from kio.schema.types import TopicName
from kio.static.primitive import i8

from cli.main import main as shoal
from client import Admin
from client.connection import Connection
from client.security import Security
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.tls_files import CLIENT_SUBJECT
from tests.tls_files import TlsFiles
from tests.tls_files import make_tls_files

pytestmark = [pytest.mark.compat, pytest.mark.slow]

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MECHANISM, ADMIN, PASSWORD = "SCRAM-SHA-512", "admin", "admin-secret"
PARTITIONS = 4
# Kafka's enum values on the wire (ResourceType, PatternType, AclOperation, AclPermissionType).
WIRE_TOPIC, WIRE_LITERAL, WIRE_READ, WIRE_ALLOW = 2, 3, 3, 3


@dataclass(frozen=True, slots=True)
class Tls:
    broker: BrokerProcess
    protocol: str
    files: TlsFiles
    port: int  # node i listens on port + i

    def config(self, node: int = 0, **extra: object) -> dict[str, object]:
        """confluent-kafka's settings, bootstrapped at `node` alone."""
        common: dict[str, object] = {
            "bootstrap.servers": f"127.0.0.1:{self.port + node}",
            "security.protocol": self.protocol,
            "ssl.ca.location": str(self.files.ca),  # the host name is checked (https)
        }
        if self.protocol == "SSL":
            common["ssl.certificate.location"] = str(self.files.client_cert)
            common["ssl.key.location"] = str(self.files.client_key)
        else:
            common |= {"sasl.mechanism": MECHANISM, "sasl.username": ADMIN,
                       "sasl.password": PASSWORD}  # fmt: skip
        return {**common, **QUIET, **extra}

    @property
    def security(self) -> Security:
        """Shoal's own client, as the same principal."""
        ca = str(self.files.ca)
        if self.protocol == "SSL":
            return Security("SSL", ca_file=ca, cert_file=str(self.files.client_cert),
                            key_file=str(self.files.client_key))  # fmt: skip
        return Security("SASL_SSL", MECHANISM, ADMIN, PASSWORD, ca_file=ca)

    async def ask(self, node: int, body: Any) -> Any:
        conn = await Connection.open("127.0.0.1", self.port + node, "test", self.security)
        try:
            return await conn.request(body)
        finally:
            await conn.close()


def _subject(pem: Path) -> str:
    """The certificate's subject as Kafka's default principal builder names it (RFC 2253)."""
    return x509.load_pem_x509_certificates(pem.read_bytes())[0].subject.rfc4514_string()


@pytest.fixture(scope="module", params=["SSL", "SASL_SSL"])
def tls(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    protocol: str = request.param
    base = tmp_path_factory.mktemp(f"processes-{protocol.lower()}")
    files = make_tls_files(base / "tls")
    data = base / "data"
    config: dict[str, object] = {
        "listeners": f"{protocol}://127.0.0.1:0",  # --port: node i on port + i
        "ssl.keystore.location": str(files.keystore),
        "ssl.truststore.location": str(files.ca),
        "authorizer.class.name": AUTHORIZER,
        "group.share.auto.offset.reset": "earliest",
        "num.partitions": PARTITIONS,  # an auto-created topic is led by both nodes
        **SHORT_SESSION_CONFIG,
    }
    if protocol == "SSL":
        # The nodes are their certificate's subject, as Kafka's brokers on an SSL listener.
        config["ssl.client.auth"] = "required"
        config["super.users"] = f"User:{CLIENT_SUBJECT};User:{_subject(files.keystore)}"
    else:
        code = shoal(["users", "add", ADMIN, "--password", PASSWORD, "--mechanism", MECHANISM,
                      "--data-dir", str(data)])  # fmt: skip
        assert code == 0
        config["sasl.enabled.mechanisms"] = MECHANISM
        config["super.users"] = f"User:{ADMIN}"
    broker = configured_broker(data, config)
    broker.port = free_ports(2)
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    try:
        wait_for_nodes(broker, 2, timeout=90)
        yield Tls(broker, protocol, files, broker.port)
    finally:
        broker.stop(60)


def _leaders(t: Tls, topic: str, node: int = 0) -> dict[int, int]:
    md = AdminClient(t.config(node)).list_topics(topic, timeout=30).topics[topic]
    assert md.error is None, md.error
    return {p.id: p.leader for p in md.partitions.values()}


def _create(t: Tls, topic: str) -> None:
    client = AdminClient(t.config())
    for future in client.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)
    assert sorted(set(_leaders(t, topic).values())) == [0, 1]  # both nodes lead partitions


def _read(t: Tls, topic: str, wanted: int, **extra: object) -> list[bytes]:
    """Every record of `topic`, with a plain Consumer (read_committed unless told)."""
    c = Consumer(t.config(**{"group.id": f"reader-{topic}", **extra}))
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < wanted and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
    c.close()
    return got


def _key_on(node: int, prefix: str) -> str:
    """A group or transactional id coordinated by `node` (crc32 % 2)."""
    keys = (f"{prefix}{i}" for i in range(100))
    return next(k for k in keys if zlib.crc32(k.encode()) % 2 == node)


def test_a_transaction_over_both_nodes_commits(tls: Tls) -> None:
    """A transactional producer writes to partitions led by both nodes and commits, with its
    coordinator on each node in turn: the other node's leader verifies with the coordinator
    and the coordinator has it write its markers, over TLS. A read_committed consumer reads
    every record (without the markers the last stable offset would hold them back)."""
    topic = "txn-over-tls"
    _create(tls, topic)
    values = []
    for home in (0, 1):
        p = Producer(tls.config(**{"transactional.id": _key_on(home, "tls-txn-")}))
        p.init_transactions(60)
        p.begin_transaction()
        for part in range(PARTITIONS):
            value = b"%d-%d" % (home, part)
            values.append(value)
            p.produce(topic, value=value, partition=part)
        p.commit_transaction(60)
    assert sorted(_read(tls, topic, len(values), **{"isolation.level": "read_committed"})) == (
        sorted(values)
    )


def test_a_topic_auto_created_through_node_1(tls: Tls) -> None:
    """Node 1 is asked for topics nobody made, with auto-creation allowed: it asks node 0 (the
    controller, KIP-590) to create them, over TLS, and answers with what node 0 made. Once by
    our own client's Metadata to node 1 alone (the forwarding certain), once by a producer that
    knows node 1 alone. Node 0 lists each, led by both nodes, and the records come back."""
    asked = "asked-of-node-1"
    answer = asyncio.run(tls.ask(1, metadata.MetadataRequest(
        topics=(metadata.request.MetadataRequestTopic(name=TopicName(asked), topic_id=None),),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False,
    )))  # fmt: skip
    (made,) = answer.topics
    assert (made.name, made.error_code, len(made.partitions)) == (asked, ErrorCode.none, PARTITIONS)
    produced = "produced-through-node-1"
    p = Producer(tls.config(1))
    for i in range(20):
        p.produce(produced, value=b"auto-%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0
    for topic in (asked, produced):
        assert sorted(set(_leaders(tls, topic, node=0).values())) == [0, 1]
    got = _read(tls, produced, 20)
    assert sorted(got) == sorted(b"auto-%d" % i for i in range(20))


def test_a_share_group_acknowledges_on_both_nodes(tls: Tls) -> None:
    """A share consumer ACCEPTs every record of partitions led by both nodes; then the group's
    coordinator (each node in turn) describes every partition's start offset past them,
    asking the other leader with ReadShareGroupStateSummary over TLS, and a second member of
    the group gets nothing."""
    topic = "shared-over-tls"
    _create(tls, topic)
    p = Producer(tls.config())
    for i in range(40):
        p.produce(topic, value=b"job-%d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0
    ends = _ends(tls, topic)
    for home in (0, 1):
        group = _key_on(home, "tls-share-")
        c = ShareConsumer(tls.config(**{"group.id": group,
                                        "share.acknowledgement.mode": "explicit"}))  # fmt: skip
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 90
        while len(got) < 40 and time.monotonic() < deadline:
            for m in c.poll(0.5):
                if m.error() is None:
                    got.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
        c.close()
        assert sorted(got) == sorted(b"job-%d" % i for i in range(40))
        described = _describe(tls, group, topic)
        # Past every record (the share state's own records follow them in the log).
        assert sorted(part for _, part in described) == list(range(PARTITIONS))
        for (_, part), o in described.items():
            assert o.start_offset >= ends[part] and o.lag == 0 and o.acquired == 0, o
        again = ShareConsumer(tls.config(**{"group.id": group}))
        again.subscribe([topic])
        extra = [m for m in again.poll(2.0) if m.error() is None]
        again.close()
        assert extra == []


def _ends(t: Tls, topic: str) -> dict[int, int]:
    """Each partition's end offset (past its data records), as its leader answers."""
    c = Consumer(t.config(**{"group.id": f"ends-{topic}"}))
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in range(PARTITIONS)}
    c.close()
    return ends


def _describe(t: Tls, group: str, topic: str) -> dict[tuple[str, int], Any]:
    """DescribeShareGroupOffsets at the group's coordinator (Shoal's own client: confluent-kafka
    has no share-group offset API), again while the closed member has not left."""

    async def run() -> dict[tuple[str, int], Any]:
        async with Admin(f"127.0.0.1:{t.port}", security=t.security) as a:
            return await a.describe_share_group_offsets(
                group, [(topic, p) for p in range(PARTITIONS)]
            )

    return asyncio.run(run())


def test_create_acls_sent_to_node_1_is_written_by_node_0(tls: Tls) -> None:
    """CreateAcls on node 1 is forwarded to node 0 over TLS (KIP-590); node 0 lists the
    binding it wrote, and node 1 follows it."""
    principal = "User:carol"
    creation = create_acls.request.AclCreation(
        resource_type=i8(WIRE_TOPIC), resource_name="tls-acl-topic",
        resource_pattern_type=i8(WIRE_LITERAL), principal=principal, host="*",
        operation=i8(WIRE_READ), permission_type=i8(WIRE_ALLOW),
    )  # fmt: skip
    answer = asyncio.run(tls.ask(1, create_acls.CreateAclsRequest(creations=(creation,))))
    assert [r.error_code for r in answer.results] == [ErrorCode.none]
    ask = describe_acls.DescribeAclsRequest(
        resource_type_filter=i8(WIRE_TOPIC), resource_name_filter="tls-acl-topic",
        pattern_type_filter=i8(WIRE_LITERAL), principal_filter=None, host_filter=None,
        operation=i8(1), permission_type=i8(1),  # ANY
    )  # fmt: skip
    for node in (0, 1):
        deadline = time.monotonic() + 10
        while True:
            listed = asyncio.run(tls.ask(node, ask))
            found = {(a.principal, a.operation, a.permission_type)
                     for r in listed.resources for a in r.acls}  # fmt: skip
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found == {(principal, WIRE_READ, WIRE_ALLOW)}, node
