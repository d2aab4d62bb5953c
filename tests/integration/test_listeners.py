"""Several listeners in one broker, over real sockets with Shoal's own client.

Metadata answers with the listener the client came in on (its advertised address when one is
set); ssl.client.auth=required turns away a TLS client without a certificate; a SASL listener
serves nothing before authentication; users are managed online and log in at once.
"""

from __future__ import annotations

import asyncio
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.sasl_handshake.v0 import SaslHandshakeRequest as SaslHandshakeV0

from broker.server import Server
from client.admin import Admin
from client.connection import Connection
from client.connection import ConnectionClosed
from client.errors import KafkaError
from client.security import AuthenticationError
from client.security import ScramClient
from client.security import Security
from client.security import TlsHandshakeError
from client.users import delete_user
from client.users import describe_users
from client.users import upsert_user
from protocol.api_keys import SASL_HANDSHAKE
from protocol.framing import frame
from protocol.messages import decode_response
from protocol.messages import encode_request
from storage.scram_credentials import SCRAM_SHA_512
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore
from tests.brokers import free_port
from tests.brokers import make_server
from tests.scrape import scrape_text
from tests.tls_files import TlsFiles
from tests.tls_files import make_tls_files
from tests.tls_files import pkcs12_stores

pytestmark = pytest.mark.integration

FAILED_LOGIN_DELAY_MS = 1000


@dataclass(frozen=True, slots=True)
class Secured:
    server: Server
    tls: TlsFiles

    def security(self, protocol: str, *, cert: bool = True, **fields: str) -> Security:
        """Settings for a listener; a client certificate unless `cert=False` (ssl.client.auth
        is required, and applies to SASL_SSL too, as in Kafka)."""
        values = {"ca_file": str(self.tls.ca), **fields}
        if cert:
            values.update(cert_file=str(self.tls.client_cert), key_file=str(self.tls.client_key))
        if protocol.startswith("SASL"):
            values = {"username": "admin", "password": "admin-pw", **values}
        return Security(protocol=protocol, **values)  # type: ignore[arg-type]


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Secured]:
    tls = make_tls_files(tmp_path / "tls")
    store = ScramCredentialStore.in_data_dir(tmp_path / "data")
    store.upsert("admin", "SCRAM-SHA-512", ScramCredential.from_password(SCRAM_SHA_512, "admin-pw"))
    store.save()
    sasl_port = free_port()
    server = make_server(
        tmp_path / "data",
        **{
            "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://0.0.0.0:{sasl_port}",
            # A name, not the address bound: Metadata must give this one to SASL_SSL clients.
            "advertised.listeners": f"SASL_SSL://localhost:{sasl_port}",
            "ssl.keystore.location": str(tls.keystore),
            "ssl.truststore.location": str(tls.ca),
            "ssl.client.auth": "required",
            "metrics.port": 0,
            "metrics.bind.address": "127.0.0.2",
            "connection.failed.authentication.delay.ms": FAILED_LOGIN_DELAY_MS,
        },
    )
    await server.start()
    yield Secured(server, tls)
    await server.stop()


METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


async def _brokers(port: int, security: Security | None) -> list[tuple[str, int]]:
    conn = await Connection.open("127.0.0.1", port, security=security)
    try:
        resp = await conn.request(METADATA)
    finally:
        await conn.close()
    return [(b.host, int(b.port)) for b in resp.brokers]


async def test_metadata_answers_with_the_listener_the_client_came_in_on(secured: Secured) -> None:
    ports = secured.server.ports
    assert await _brokers(ports["PLAINTEXT"], None) == [("127.0.0.1", ports["PLAINTEXT"])]
    assert await _brokers(ports["SSL"], secured.security("SSL")) == [("127.0.0.1", ports["SSL"])]
    sasl = ports["SASL_SSL"]
    assert await _brokers(sasl, secured.security("SASL_SSL")) == [("localhost", sasl)]


async def test_required_client_auth_turns_away_a_client_without_a_certificate(
    secured: Secured,
) -> None:
    with pytest.raises((ConnectionError, ssl.SSLError)):
        await _brokers(secured.server.ports["SSL"], secured.security("SSL", cert=False))


async def test_a_sasl_listener_closes_on_a_request_before_authentication(
    secured: Secured,
) -> None:
    tls_only = secured.security("SSL")  # TLS, but no SASL handshake
    conn = await Connection.open("127.0.0.1", secured.server.ports["SASL_SSL"], security=tls_only)
    with pytest.raises(ConnectionClosed):
        await conn.request(METADATA)
    await conn.close()


async def test_users_are_managed_online_and_log_in_at_once(secured: Secured) -> None:
    port = secured.server.ports["SASL_SSL"]
    async with Admin(f"127.0.0.1:{port}", security=secured.security("SASL_SSL")) as admin:
        await upsert_user(admin.cluster, "bob", "SCRAM-SHA-512", "bob-pw", 8192)
        assert await describe_users(admin.cluster, ["bob"]) == {"bob": {"SCRAM-SHA-512": 8192}}
        bob = secured.security("SASL_SSL", username="bob", password="bob-pw")
        await (await Connection.open("127.0.0.1", port, security=bob)).close()
        await delete_user(admin.cluster, "bob", "SCRAM-SHA-512")
        missing = (await describe_users(admin.cluster, ["bob"]))["bob"]
        assert not isinstance(missing, dict)
        assert missing.error_code == ErrorCode.resource_not_found
    with pytest.raises(AuthenticationError):
        await Connection.open("127.0.0.1", port, security=bob)
    # Written through to the file the broker reads at its next start.
    again = ScramCredentialStore.in_data_dir(secured.server.config.data_dir)
    assert again.users() == ["admin"]


async def test_metrics_listen_on_their_own_address(secured: Secured) -> None:
    port = secured.server.metrics_port
    # From a thread: a scrape's readings are made on the broker's loop, which is this one.
    assert "kafka_network_requestmetrics" in await scrape_text(port, "127.0.0.2")
    with pytest.raises(OSError):
        await scrape_text(port, "127.0.0.1")


async def test_a_failed_login_waits_without_stalling_other_clients(secured: Secured) -> None:
    """connection.failed.authentication.delay.ms is an await, not a sleep on the loop: a
    PLAINTEXT client is answered at once, again and again, while a wrong password waits."""
    ports = secured.server.ports
    wrong = secured.security("SASL_SSL", password="wrong")
    started = time.monotonic()
    login = asyncio.create_task(Connection.open("127.0.0.1", ports["SASL_SSL"], security=wrong))
    others: list[float] = []
    while not login.done():
        t = time.monotonic()
        await _brokers(ports["PLAINTEXT"], None)
        others.append(time.monotonic() - t)
    with pytest.raises(AuthenticationError, match="Invalid user credentials"):
        await login
    assert time.monotonic() - started >= FAILED_LOGIN_DELAY_MS / 1000
    assert len(others) >= 3 and max(others) < FAILED_LOGIN_DELAY_MS / 2000


async def test_a_credential_change_that_cannot_be_written_is_not_made(secured: Secured) -> None:
    """The file cannot be replaced (its temporary name is taken by a directory): the client
    gets KAFKA_STORAGE_ERROR and the broker's memory stays what the file holds."""
    blocker = secured.server.config.data_dir / "scram-credentials.json.tmp"
    blocker.mkdir()
    port = secured.server.ports["PLAINTEXT"]
    async with Admin(f"127.0.0.1:{port}") as admin:
        with pytest.raises(KafkaError) as refused:
            await upsert_user(admin.cluster, "bob", "SCRAM-SHA-256", "bob-pw")
        assert refused.value.error_code == ErrorCode.kafka_storage_error
        assert set(await describe_users(admin.cluster)) == {"admin"}
        blocker.rmdir()
        await upsert_user(admin.cluster, "bob", "SCRAM-SHA-256", "bob-pw")
        assert set(await describe_users(admin.cluster)) == {"admin", "bob"}


async def test_a_large_frame_before_login_closes_the_connection(secured: Secured) -> None:
    """sasl.server.max.receive.size (512 KiB) bounds what an anonymous client can make the
    broker buffer; after login, socket.request.max.bytes applies again."""
    port = secured.server.ports["SASL_SSL"]
    context = secured.security("SSL").ssl_context()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    writer.write((1024 * 1024).to_bytes(4, "big") + bytes(1024))
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 30) == b""  # closed, nothing answered
    writer.close()
    admin = secured.security("SASL_SSL")
    async with Admin(f"127.0.0.1:{port}", security=admin) as client:
        # A CreateTopics request over 512 KiB (many configs) is read once logged in.
        configs = {f"x.{i}": "v" * 1000 for i in range(600)}
        with pytest.raises(KafkaError):  # refused for its unknown configs, not by size
            await client.create_topic("big", 1, configs)


class _RawSocket:
    """Bare frames over TLS: what a client does after a v0 SaslHandshake."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, payload: bytes) -> None:
        self.writer.write(frame(payload))
        await self.writer.drain()

    async def receive(self) -> bytes:
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        return await self.reader.readexactly(size)


async def _raw_login(secured: Secured, password: str) -> tuple[_RawSocket, ScramClient]:
    port = secured.server.ports["SASL_SSL"]
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=secured.security("SSL").ssl_context()
    )
    raw = _RawSocket(reader, writer)
    await raw.send(encode_request(SaslHandshakeV0(mechanism="SCRAM-SHA-512"), 1, "old"))
    _, shake = decode_response(SASL_HANDSHAKE, 0, await raw.receive())
    assert shake.error_code == ErrorCode.none
    client = ScramClient("sha512", "admin", password)
    await raw.send(client.step(b""))  # client-first, bare
    await raw.send(client.step(await raw.receive()))  # client-final, bare
    return raw, client


async def test_a_v0_handshake_is_followed_by_bare_tokens(secured: Secured) -> None:
    raw, client = await _raw_login(secured, "admin-pw")
    client.step(await raw.receive())  # server-final, bare: checks the broker's signature
    assert client.done
    await raw.send(encode_request(METADATA, 2, "old"))
    _, metadata = decode_response(METADATA.__api_key__, METADATA.__version__, await raw.receive())
    assert len(metadata.brokers) == 1
    raw.writer.close()


async def test_a_v0_login_with_a_wrong_password_is_closed_unanswered(secured: Secured) -> None:
    raw, _ = await _raw_login(secured, "wrong")
    assert await asyncio.wait_for(raw.reader.read(), 30) == b""
    raw.writer.close()


def _pkcs12(tls: TlsFiles, directory: Path, password: bytes) -> tuple[Path, Path]:
    return pkcs12_stores(tls.keystore, tls.ca, directory, password)


async def test_pkcs12_keystore_and_truststore(tmp_path: Path) -> None:
    """`ssl.keystore.type=PKCS12` and `ssl.truststore.type=PKCS12` with their store passwords,
    as Kafka takes them beside PEM: a client that trusts the CA connects with its certificate
    (mutual TLS checked against the PKCS12 truststore); a wrong store password stops the
    broker at start with an SSL error, as a bad PEM file does."""
    tls = make_tls_files(tmp_path / "tls")
    keystore, truststore = _pkcs12(tls, tmp_path / "tls", b"store-secret")
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "store-secret",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(truststore),
        "ssl.truststore.password": "store-secret",
        "ssl.client.auth": "required",
    }
    server = make_server(tmp_path / "data", **settings)
    await server.start()
    try:
        port = server.ports["SSL"]
        security = Secured(server, tls).security("SSL")
        assert await _brokers(port, security) == [("127.0.0.1", port)]
        with pytest.raises((ConnectionError, ssl.SSLError)):
            await _brokers(port, Secured(server, tls).security("SSL", cert=False))
    finally:
        await server.stop()
    wrong = make_server(tmp_path / "data2", **{**settings, "ssl.keystore.password": "nope"})
    with pytest.raises(ssl.SSLError, match="PKCS12"):
        await wrong.start()
    await wrong.stop()
    assert not list(Path(tempfile.gettempdir()).glob("shoal-keystore-*"))  # nothing left behind


async def test_a_client_on_the_wrong_kind_of_listener_is_told_so(secured: Secured) -> None:
    """TLS or SASL against a PLAINTEXT listener, and SASL_SSL against an SSL one: the error names
    the mismatch (issue 30: a bare ConnectionResetError, and "the broker offers " with nothing
    after it)."""
    ports = secured.server.ports
    plain = ports["PLAINTEXT"]
    with pytest.raises(TlsHandshakeError, match=r"security.protocol=SSL needs a listener that"):
        await Connection.open("127.0.0.1", plain, security=secured.security("SSL"))
    sasl = Security(protocol="SASL_PLAINTEXT", username="admin", password="admin-pw")
    with pytest.raises(AuthenticationError, match="offers no SASL mechanism on this listener"):
        await Connection.open("127.0.0.1", plain, security=sasl)
    with pytest.raises(AuthenticationError, match="offers no SASL mechanism on this listener"):
        await Connection.open("127.0.0.1", ports["SSL"], security=secured.security("SASL_SSL"))
