"""Connection limits with Kafka's names, defaults and semantics, over real sockets.

Kafka's sources: `core/src/main/scala/kafka/network/SocketServer.scala` (Acceptor.accept,
ConnectionQuotas.inc / waitForConnectionSlot, Processor.closeExcessConnections),
`clients/src/main/java/org/apache/kafka/common/network/Selector.java` (IdleExpiryManager,
maybeCloseOldestConnection), `server/src/main/java/org/apache/kafka/network/
SocketServerConfigs.java` (names, defaults) and KIP-402 (max.connections).
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
from collections.abc import AsyncIterator
from collections.abc import Awaitable
from collections.abc import Callable
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12 import request as fetch_v12
from structlog.testing import capture_logs

from broker.server import Server
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource
from client.connection import Connection
from client.security import Security
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import encode_request
from tests.brokers import make_server
from tests.tls_files import make_tls_files

pytestmark = pytest.mark.integration

LISTENER = {"listener": "PLAINTEXT"}
API_VERSIONS = frame(
    encode_request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), 1, "t"
    )
)


class Client:
    """A raw connection that sends ApiVersions and reads the answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, source: str = "127.0.0.1") -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)))

    async def send(self, request: bytes = API_VERSIONS) -> bytes | None:
        """The answer to `request`, or None: the broker closed the connection (and so do we)."""
        try:
            self.writer.write(request)
            await self.writer.drain()
            size = SIZE.unpack(await self.reader.readexactly(SIZE.size))[0]
            return await self.reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.close()
            return None

    async def closed_by_broker(self) -> bool:
        """Whether the broker closes the connection (within 10 s, sending nothing first)."""
        try:
            closed = await asyncio.wait_for(self.reader.read(1), 10) == b""
        except ConnectionError:
            closed = True
        self.close()
        return closed

    def close(self) -> None:
        self.writer.close()


async def served(port: int, source: str = "127.0.0.1") -> Client | None:
    """A new connection, if the broker serves it (None: it closed it at once)."""
    client = await Client.open(port, source)
    if await client.send() is not None:
        return client
    client.close()
    return None


async def served_within(port: int, source: str = "127.0.0.1", deadline_s: float = 5) -> Client:
    """A new connection served, trying again until the broker has let a closed one go."""
    deadline = time.monotonic() + deadline_s
    while (client := await served(port, source)) is None:
        assert time.monotonic() < deadline, "no connection was served again"
        await asyncio.sleep(0.01)
    return client


async def eventually(condition: Callable[[], bool], deadline_s: float = 5) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


def sample(server: Server, name: str, labels: dict[str, str] = LISTENER) -> float | None:
    return server.services.metrics.registry.get_sample_value(name, labels)


def connection_count(server: Server) -> float | None:
    return sample(server, "kafka_server_socket_server_metrics_connection_count")


Start = Callable[..., Awaitable[Server]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """`await start(**settings)`: a broker with these settings (Kafka names), stopped after."""
    servers: list[Server] = []

    async def start(**settings: object) -> Server:
        server = make_server(tmp_path / "data", **settings)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


async def test_a_connection_over_max_connections_per_ip_is_closed_and_let_in_once_one_closes(
    start: Start,
) -> None:
    """Kafka's ConnectionQuotas.inc throws TooManyConnectionsException once the address holds
    max.connections.per.ip; the Acceptor closes that connection at once and logs it. A slot
    comes back when a connection of that address closes."""
    server = await start(**{"max.connections.per.ip": 2})
    port = server.port
    first, second = await served(port), await served(port)
    assert first is not None and second is not None
    with capture_logs() as logs:
        assert await served(port) is None
    refusal = next(e for e in logs if e["event"] == "connection refused: max.connections.per.ip")
    assert refusal["listener"] == "PLAINTEXT"
    assert refusal["ip"] == "127.0.0.1"
    assert refusal["connections"] == 2 and refusal["max_connections_per_ip"] == 2
    assert await first.send() is not None and await second.send() is not None  # untouched
    first.close()
    third = await served_within(port)
    refused = "shoal_socket_server_connections_refused_total"
    assert sample(server, refused, {**LISTENER, "limit": "max.connections.per.ip"}) >= 1
    assert connection_count(server) == 2
    for client in (second, third):
        client.close()


async def test_an_override_sets_one_address_s_limit(start: Start) -> None:
    """max.connections.per.ip.overrides (`host:count,...`): its address gets its own limit, the
    others the default (ConnectionQuotas: maxConnectionsPerIpOverrides.getOrElse)."""
    server = await start(
        **{"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "127.0.0.2:3"}
    )
    port = server.port
    local = await served(port)
    assert local is not None
    assert await served(port) is None
    others = [await served(port, "127.0.0.2") for _ in range(3)]
    assert all(others)
    assert await served(port, "127.0.0.2") is None
    for client in (local, *others):
        assert client is not None
        client.close()


async def test_a_host_name_override_counts_for_its_addresses_and_zero_refuses_the_rest(
    start: Start,
) -> None:
    """max.connections.per.ip=0 is allowed only with overrides (KafkaConfig.validateValues);
    an override may name a host (Kafka resolves it with InetAddress.getByName)."""
    server = await start(
        **{"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "localhost:2"}
    )
    port = server.port
    two = [await served(port), await served(port)]
    assert all(two)
    assert await served(port) is None
    assert await served(port, "127.0.0.2") is None  # no override: 0
    for client in two:
        assert client is not None
        client.close()


async def test_the_per_ip_limits_are_dynamic_broker_configs(server: Server) -> None:
    """Kafka's DynamicConnectionQuota reconfigures max.connections.per.ip(.overrides) and, since
    KIP-402, max.connections without a restart."""
    port = server.port
    names = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides")
    async with Admin(f"127.0.0.1:{port}") as admin:
        await admin.incremental_alter_configs(
            ConfigResourceType.BROKER, "", {"max.connections.per.ip.overrides": "127.0.0.2:1"}
        )
        entries = await admin.describe_config_entries(ConfigResourceType.BROKER, "1")
    by_name = {e.name: e for e in entries}
    assert by_name["max.connections.per.ip.overrides"].value == "127.0.0.2:1"
    assert by_name["max.connections.per.ip.overrides"].source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert not any(by_name[n].read_only for n in names)
    assert (
        by_name["max.connections"].value
        == by_name["max.connections.per.ip"].value
        == str(2**31 - 1)
    )
    held = await served(port, "127.0.0.2")
    assert held is not None
    deadline = time.monotonic() + 5  # the override is resolved off the loop
    while (extra := await served(port, "127.0.0.2")) is not None:
        extra.close()
        assert time.monotonic() < deadline, "the new override was not applied"
    held.close()


async def test_at_max_connections_the_broker_stops_accepting_until_one_closes(start: Start) -> None:
    """KIP-402: at max.connections the acceptor waits for a slot (waitForConnectionSlot) and
    accepts nothing meanwhile; the waiting client is not refused but served once a connection
    closes. AcceptorBlockedPercent counts the wait."""
    server = await start(**{"max.connections": 2})
    port = server.port
    with capture_logs() as logs:
        first, second = await served(port), await served(port)
        assert first is not None and second is not None
        # The kernel completes the handshake (listen backlog); the broker does not accept it.
        waiting = socket.create_connection(("127.0.0.1", port))
        waiting.sendall(API_VERSIONS)
        for _ in range(3):  # the loop turns over; an accepting broker would answer meanwhile
            assert await first.send() is not None
        with pytest.raises(BlockingIOError):
            waiting.recv(1, socket.MSG_DONTWAIT)
        assert connection_count(server) == 2
    blocked = next(e for e in logs if e["event"].startswith("max.connections reached"))
    assert blocked["listener"] == "PLAINTEXT" and blocked["max_connections"] == 2
    first.close()
    waiting.settimeout(10)
    answer = await asyncio.get_running_loop().run_in_executor(None, waiting.recv, 4)
    assert len(answer) == 4  # the size of its ApiVersions answer: served, not refused
    blocked_s = sample(server, "kafka_network_acceptor_acceptorblockedpercent_seconds_total")
    assert blocked_s is not None and blocked_s > 0
    assert sample(server, "kafka_server_socket_server_metrics_connection_creation_total") == 3
    assert sample(server, "kafka_server_socket_server_metrics_connection_close_total") == 1
    waiting.close()
    second.close()


async def test_a_lowered_max_connections_closes_the_least_recently_active(server: Server) -> None:
    """Processor.closeExcessConnections: with more connections than a lowered max.connections,
    the least recently used ones are closed."""
    clients = [await served(server.port) for _ in range(3)]
    assert all(clients)
    oldest, older, newest = clients
    assert oldest is not None and older is not None and newest is not None
    assert await newest.send() is not None
    with capture_logs() as logs:
        server.services.dynamic_configs.alter({"max.connections": "1"})
        server.run_timers()  # the sweep, at once rather than at its next tick
    assert await oldest.closed_by_broker() and await older.closed_by_broker()
    assert await newest.send() is not None
    closed = next(e for e in logs if e["event"] == "connections closed: max.connections")
    assert closed["closed"] == 2 and closed["limit"] == 1
    by_broker = "shoal_socket_server_connections_closed_by_broker_total"
    assert sample(server, by_broker, {**LISTENER, "reason": "max.connections"}) == 2
    newest.close()


IDLE_MS = 500


async def test_an_idle_connection_is_closed_after_connections_max_idle_ms(start: Start) -> None:
    """Selector's IdleExpiryManager closes a connection with no activity for
    connections.max.idle.ms (default 10 minutes); never before."""
    server = await start(**{"connections.max.idle.ms": IDLE_MS})
    client = await Client.open(server.port)
    sent = time.monotonic()  # the broker reads the request after this
    assert await client.send() is not None
    with capture_logs() as logs:
        assert await client.closed_by_broker()
    assert time.monotonic() - sent >= IDLE_MS / 1000
    closed = next(e for e in logs if e["event"] == "connections closed: connections.max.idle.ms")
    assert closed["listener"] == "PLAINTEXT" and closed["limit"] == IDLE_MS
    assert closed["closed"] == 1
    by_broker = "shoal_socket_server_connections_closed_by_broker_total"
    assert sample(server, by_broker, {**LISTENER, "reason": "connections.max.idle.ms"}) == 1
    await eventually(lambda: connection_count(server) == 0)


async def test_a_client_sending_requests_regularly_is_not_idle(start: Start) -> None:
    """Each request restarts the idle time (IdleExpiryManager.update on every read); once the
    client stops, the connection is closed after the idle limit."""
    server = await start(**{"connections.max.idle.ms": IDLE_MS})
    client = await served(server.port)
    assert client is not None
    until = time.monotonic() + 3 * IDLE_MS / 1000
    while time.monotonic() < until:
        sent = time.monotonic()  # the broker reads the request after this
        assert await client.send() is not None
        await asyncio.sleep(IDLE_MS / 5000)
    assert await client.closed_by_broker()
    assert time.monotonic() - sent >= IDLE_MS / 1000


async def test_a_long_poll_longer_than_connections_max_idle_ms_is_not_cut(start: Start) -> None:
    """A Fetch waiting its MaxWait (3 x the idle limit) for records that never come: the
    request is in flight, so the connection is not idle (Shoal's choice: Kafka's Selector
    would count a muted channel's wait); it is answered, and then idle as any other."""
    server = await start(**{"connections.max.idle.ms": IDLE_MS})
    server.services.logs.create_topic("quiet", 1, {})
    client = await Client.open(server.port)
    partition = build(
        fetch_v12.FetchPartition, partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    fetch = build(
        fetch_v12.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=3 * IDLE_MS),
        min_bytes=1,
        max_bytes=1 << 20,
        topics=(build(fetch_v12.FetchTopic, topic="quiet", partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    started = time.monotonic()
    assert await client.send(frame(encode_request(fetch, 7, "t"))) is not None
    assert time.monotonic() - started >= 3 * IDLE_MS / 1000 * 0.9
    assert await client.send() is not None  # still open
    assert await client.closed_by_broker()  # and idle from here


@pytest.fixture
async def tls_broker(tmp_path: Path) -> AsyncIterator[tuple[Server, Path]]:
    tls = make_tls_files(tmp_path / "tls")
    server = make_server(
        tmp_path / "data",
        **{
            "listeners": "SSL://127.0.0.1:0",
            "ssl.keystore.location": str(tls.keystore),
            "max.connections.per.ip": 1,
        },
    )
    await server.start()
    yield server, tls.ca
    await server.stop()


async def test_a_failed_tls_handshake_gives_its_slot_back(
    tls_broker: tuple[Server, Path],
) -> None:
    """The slot is taken at accept, before the handshake: a handshake that fails must give it
    back, or max.connections.per.ip would lock the address out."""
    server, ca = tls_broker
    port = server.ports["SSL"]
    for _ in range(3):
        plain = await Client.open(port)
        assert await plain.send() is None  # not TLS: the handshake fails, the broker closes
    closes = "kafka_server_socket_server_metrics_connection_close_total"
    assert sample(server, closes, {"listener": "SSL"}) == 3
    security = Security(protocol="SSL", ca_file=str(ca))
    deadline = time.monotonic() + 5
    while True:
        try:
            conn = await Connection.open("127.0.0.1", port, security=security)
            await conn.request(
                ApiVersionsRequest(client_software_name="t", client_software_version="1")
            )
            break
        except (ConnectionError, OSError):
            assert time.monotonic() < deadline, "the failed handshakes kept their slots"
            await asyncio.sleep(0.01)
    await conn.close()
