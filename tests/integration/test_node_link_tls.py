"""The processes' own connections to each other over an SSL inter-node listener (issue 33).

In-process nodes of `--processes 2` over real sockets, with the TLS tests' certificates
(`tests/tls_files.py`). A node link speaks TLS with the listener's keystore and truststore; one
whose handshake fails fails its request as a refused connection does (an OSError the callers
already handle), and a peer that never finishes its handshake is bounded by the request's
timeout, never a hang: Kafka's inter-broker sender likewise fails a request whose connection
could not be set up (`NetworkClient` disconnects it), with `request.timeout.ms` as the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.types import TopicName

from broker import controller_link
from broker.node_link import NodeLinks
from broker.server import Server
from client.connection import Connection
from client.security import Security
from client.security import TlsHandshakeError
from tests.brokers import free_ports
from tests.brokers import make_server
from tests.tls_files import TlsFiles
from tests.tls_files import make_tls_files

pytestmark = pytest.mark.integration

VERSIONS = ApiVersionsRequest(client_software_name="test", client_software_version="1")


def _node(data: Path, tls: TlsFiles, port: int, node: int, **extra: object) -> Server:
    settings: dict[str, object] = {
        "listeners": f"SSL://127.0.0.1:{port + node}",
        "processes": 2,
        "node.id": node,
        "ssl.keystore.location": str(tls.keystore),
        "ssl.truststore.location": str(tls.ca),
        "ssl.client.auth": "required",
        **extra,
    }
    return make_server(data, **settings)


def _links(server: Server) -> NodeLinks:
    links = server.services.node_links
    assert links is not None
    return links


@contextlib.asynccontextmanager
async def _silent(port: int) -> AsyncIterator[list[asyncio.StreamWriter]]:
    """A listener on `port` that accepts and never answers (a node stuck before its handshake)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", port)
    try:
        yield held
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_node_links_speak_tls_with_the_listener_settings(tmp_path: Path) -> None:
    """Node 1 asks node 0 over TLS, showing the keystore's certificate (node 0 requires one)."""
    tls = make_tls_files(tmp_path / "tls")
    port = free_ports(2)
    zero, one = _node(tmp_path, tls, port, 0), _node(tmp_path, tls, port, 1)
    await zero.start()
    await one.start()
    try:
        answer = await _links(one).request(0, VERSIONS)
        assert answer.error_code == ErrorCode.none and answer.api_keys
    finally:
        await one.stop()
        await zero.stop()


async def test_a_failed_handshake_fails_the_request_as_a_refused_connection(
    tmp_path: Path,
) -> None:
    """Node 0's certificate from a CA node 1 does not trust: OSError (TlsHandshakeError) at
    once, and the next request opens a new connection (and fails the same way)."""
    ours, theirs = make_tls_files(tmp_path / "ours"), make_tls_files(tmp_path / "theirs")
    port = free_ports(2)
    zero = _node(tmp_path / "zero", theirs, port, 0, **{"ssl.client.auth": "none"})
    one = _node(tmp_path / "one", ours, port, 1)
    await zero.start()
    await one.start()
    try:
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(TlsHandshakeError, match="certificate is refused"):
                await _links(one).request(0, VERSIONS)
            assert time.monotonic() - started < 5
    finally:
        await one.stop()
        await zero.stop()


async def test_a_peer_that_never_finishes_its_handshake_is_bounded(tmp_path: Path) -> None:
    """A node link: TimeoutError within the request's timeout. The auto-creation node 1 sends
    to node 0: the client gets LEADER_NOT_AVAILABLE within the same bound (before, it waited
    for asyncio's 60 s handshake timeout, and with no bound at all on a node 0 that accepted
    and never answered), and node 1 serves other clients meanwhile."""
    tls = make_tls_files(tmp_path / "tls")
    port = free_ports(2)
    one = _node(tmp_path, tls, port, 1)
    await one.start()
    client = Security("SSL", ca_file=str(tls.ca), cert_file=str(tls.client_cert),
                      key_file=str(tls.client_key))  # fmt: skip
    try:
        async with _silent(port):
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await _links(one).request(0, VERSIONS, timeout_s=1.0)
            assert time.monotonic() - started < 5

            async def ask(body: Any) -> Any:
                conn = await Connection.open("127.0.0.1", port + 1, "test", client)
                try:
                    return await conn.request(body)
                finally:
                    await conn.close()

            metadata = MetadataRequest(
                topics=(MetadataRequestTopic(name=TopicName("never-made"), topic_id=None),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(controller_link, "REQUEST_TIMEOUT_S", 2.0)
                started = time.monotonic()
                waiting = asyncio.create_task(ask(metadata))
                await asyncio.sleep(0.3)
                other = await asyncio.wait_for(ask(VERSIONS), 5)  # served meanwhile
                assert other.error_code == ErrorCode.none and not waiting.done()
                answer = await asyncio.wait_for(waiting, 10)
            (topic,) = answer.topics
            assert topic.error_code == ErrorCode.leader_not_available
            assert time.monotonic() - started < 8
    finally:
        await one.stop()


async def test_auto_creation_reaches_node_0_at_its_own_address_not_the_advertised_one(
    tmp_path: Path,
) -> None:
    """The inter-node listener advertised under a name this host cannot resolve (a NAT, a
    container's published name), which the certificate carries: node 1 still has node 0
    create a topic asked of it, over TLS to the listener's own address, the certificate
    checked for the advertised name (docs/multicore.md: the processes connect to the
    listener's own address)."""
    tls = make_tls_files(tmp_path / "tls", "unreachable.invalid")
    port = free_ports(2)
    zero, one = (
        _node(tmp_path, tls, port, n, **{
            "ssl.client.auth": "none",
            "advertised.listeners": f"SSL://unreachable.invalid:{port + n}",
        })
        for n in (0, 1)
    )  # fmt: skip
    await zero.start()
    await one.start()
    client = Security("SSL", ca_file=str(tls.ca))
    try:
        conn = await Connection.open("127.0.0.1", port + 1, "test", client)
        try:
            metadata = MetadataRequest(
                topics=(MetadataRequestTopic(name=TopicName("made-by-0"), topic_id=None),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
            answer = await asyncio.wait_for(conn.request(metadata), 20)
        finally:
            await conn.close()
        (topic,) = answer.topics
        assert topic.error_code == ErrorCode.none
        assert zero.services.logs.topic("made-by-0") is not None
    finally:
        await one.stop()
        await zero.stop()
