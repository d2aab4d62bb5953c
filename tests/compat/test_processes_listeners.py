"""`shoal serve --processes 2` with two listeners and an advertised host (issue 33).

One supervisor, two nodes, each on both listeners at the configured port + its id:
SASL_PLAINTEXT (SCRAM users made with `shoal users add` before the start; listed first, so
the first listener is one the processes could not use among themselves) advertised as
`localhost`, and PLAINTEXT, the inter-node listener (Kafka's default inter-broker listener is
the one named PLAINTEXT: `KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol`).

Kafka answers Metadata with the endpoints of the listener the request came in on
(`KafkaApis.handleTopicMetadataRequest`: `metadataCache.getAliveBrokerNodes(
request.context.listenerName)`), and so do FindCoordinator and DescribeCluster: a client on
one listener is never told another's address. confluent-kafka's clients are unchanged.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.find_coordinator.v4 import FindCoordinatorRequest
from kio.schema.metadata.v12 import MetadataRequest
from kio.static.protocol import RequestPayload

from bench.broker import listens
from cli.main import main as shoal
from client.connection import Connection
from client.connection import ConnectionClosed
from client.security import Security
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic

pytestmark = [pytest.mark.compat, pytest.mark.slow]

USER, PASSWORD, MECHANISM = "svc", "svc-secret", "SCRAM-SHA-512"
PARTITIONS = 4


@dataclass(frozen=True, slots=True)
class Listeners:
    broker: BrokerProcess
    sasl: int  # node 0's SASL_PLAINTEXT port (node 1: + 1), advertised as localhost
    plain: int  # node 0's PLAINTEXT port (node 1: + 1), the inter-node listener

    def sasl_config(self, node: int = 0, **extra: object) -> dict[str, object]:
        """librdkafka settings on the SASL listener, bootstrapped at `node`'s advertised name."""
        return {
            "bootstrap.servers": f"localhost:{self.sasl + node}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            **QUIET,
            **extra,
        }

    def plain_config(self, node: int = 0, **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": f"127.0.0.1:{self.plain + node}", **QUIET, **extra}


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    data = tmp_path_factory.mktemp("processes-listeners") / "data"
    code = shoal(
        ["users", "add", USER, "--password", PASSWORD, "--mechanism", MECHANISM,
         "--data-dir", str(data)]
    )  # fmt: skip
    assert code == 0
    sasl = free_ports(2)
    plain = free_ports(2, avoid=frozenset((sasl, sasl + 1)))
    config: dict[str, object] = {
        # The launcher's --port moves the first listener (SASL_PLAINTEXT) to `sasl`.
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:{plain}",
        "advertised.listeners": f"SASL_PLAINTEXT://localhost:{sasl}",
        "sasl.enabled.mechanisms": MECHANISM,
        "group.share.auto.offset.reset": "earliest",
        **SHORT_SESSION_CONFIG,
    }
    broker = configured_broker(data, config)
    broker.port = sasl
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    try:
        wait_for_nodes(broker, 2, timeout=90)  # both on sasl + i
        deadline = time.monotonic() + 60
        while not all(listens(plain + n) for n in (0, 1)):
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.1)
        yield Listeners(broker, sasl, plain)
    finally:
        broker.stop(60)


def _nodes(admin: AdminClient) -> dict[int, tuple[str, int]]:
    md = admin.list_topics(timeout=30)
    return {b.id: (b.host, b.port) for b in md.brokers.values()}


def test_metadata_through_each_listener_lists_that_listeners_ports_of_both_nodes(
    two_listeners: Listeners,
) -> None:
    """Asked on node 1, each listener names node 0 and node 1 at its own ports (+ id), the
    SASL one with its advertised host; DescribeCluster agrees."""
    t = two_listeners
    plain_nodes = {0: ("127.0.0.1", t.plain), 1: ("127.0.0.1", t.plain + 1)}
    sasl_nodes = {0: ("localhost", t.sasl), 1: ("localhost", t.sasl + 1)}
    for node in (0, 1):
        plain = AdminClient(t.plain_config(node))
        sasl = AdminClient(t.sasl_config(node))
        assert _nodes(plain) == plain_nodes
        assert _nodes(sasl) == sasl_nodes
        for client, wanted in ((plain, plain_nodes), (sasl, sasl_nodes)):
            cluster = client.describe_cluster(request_timeout=30).result(30)
            assert {n.id: (n.host, n.port) for n in cluster.nodes} == wanted
            assert cluster.controller.id == 0


async def _ask(port: int, security: Security | None, request: RequestPayload) -> Any:
    conn = await Connection.open("127.0.0.1", port, security=security)
    try:
        return await conn.request(request)
    finally:
        await conn.close()


def test_find_coordinator_answers_with_the_listener_asked_and_sasl_stays_sasl(
    two_listeners: Listeners,
) -> None:
    """FindCoordinator on each listener of each node names the group's coordinator at that
    listener's address; node 1's SASL listener still serves nothing before a login."""
    t = two_listeners
    security = Security("SASL_PLAINTEXT", MECHANISM, USER, PASSWORD)
    groups = [f"g{i}" for i in range(8)]
    for node in (0, 1):
        for port, sec, host, base in (
            (t.plain + node, None, "127.0.0.1", t.plain),
            (t.sasl + node, security, "localhost", t.sasl),
        ):
            resp = asyncio.run(_ask(port, sec, FindCoordinatorRequest(coordinator_keys=groups)))
            found = {c.key: (c.node_id, c.host, c.port) for c in resp.coordinators}
            for g in groups:
                home = zlib.crc32(g.encode()) % 2
                assert found[g] == (home, host, base + home)
    metadata = MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with pytest.raises(ConnectionClosed):
        asyncio.run(_ask(t.sasl + 1, None, metadata))


def _produce(config: dict[str, object], topic: str, prefix: str, count: int) -> set[int]:
    """`count` records over every partition; the partitions acknowledged."""
    acked: list[int] = []

    def done(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        acked.append(msg.partition())

    p = Producer({**config, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=f"{prefix}{i}".encode(), partition=i % PARTITIONS, on_delivery=done)
    assert p.flush(60) == 0
    assert len(acked) == count
    return set(acked)


def _share_read(consumer: ShareConsumer, topic: str, wanted: set[bytes]) -> set[bytes]:
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 90
    while not wanted <= seen and time.monotonic() < deadline:
        seen |= {m.value() for m in consumer.poll(0.5) if m.error() is None}
    consumer.close()
    return seen


def test_producers_and_share_consumers_work_through_each_listener(
    two_listeners: Listeners,
) -> None:
    """A producer and a share group on each listener; the SASL clients bootstrapped at
    `localhost` reach the partitions of both leaders."""
    t = two_listeners
    topic = "both-listeners"
    create_topic(f"127.0.0.1:{t.plain}", topic, PARTITIONS, timeout=30)
    md = AdminClient(t.sasl_config()).list_topics(topic, timeout=30)
    leaders = {p.id: p.leader for p in md.topics[topic].partitions.values()}
    assert sorted(set(leaders.values())) == [0, 1]
    assert _produce(t.plain_config(1), topic, "plain-", 200) == set(range(PARTITIONS))
    assert _produce(t.sasl_config(1), topic, "sasl-", 200) == set(range(PARTITIONS))
    wanted = {f"{prefix}{i}".encode() for prefix in ("plain-", "sasl-") for i in range(200)}
    via_sasl = ShareConsumer({**t.sasl_config(), "group.id": "through-sasl"})
    assert _share_read(via_sasl, topic, wanted) == wanted
    via_plain = ShareConsumer({**t.plain_config(), "group.id": "through-plain"})
    assert _share_read(via_plain, topic, wanted) == wanted


def test_a_transaction_across_both_nodes_through_the_sasl_listener(
    two_listeners: Listeners,
) -> None:
    """A transaction over partitions of both nodes commits: the leaders verify with its
    coordinator and the coordinator sends markers over the PLAINTEXT listener, not the first
    (SASL) one, where the processes could not log in."""
    t = two_listeners
    topic = "txn-both-listeners"
    create_topic(f"127.0.0.1:{t.plain}", topic, PARTITIONS, timeout=30)
    p = Producer(t.sasl_config(**{"transactional.id": "across-listeners"}))
    p.init_transactions(60)
    p.begin_transaction()
    for partition in range(PARTITIONS):
        p.produce(topic, value=b"t%d" % partition, partition=partition)
    p.commit_transaction(60)
    reader = Consumer(
        t.plain_config(**{"group.id": "txn-reader", "isolation.level": "read_committed"})
    )
    reader.assign([TopicPartition(topic, n, 0) for n in range(PARTITIONS)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(got) < PARTITIONS and time.monotonic() < deadline:
        got |= {m.value() for m in reader.consume(10, 0.5) if m.error() is None}
    reader.close()
    assert got == {b"t%d" % n for n in range(PARTITIONS)}
