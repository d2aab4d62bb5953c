"""SASL's server side without sockets: SCRAM against RFC 7677's worked example, PLAIN against
the same stored credentials, the session's order of steps, and the credential file."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from broker.sasl.errors import AuthenticationFailed
from broker.sasl.scram import ScramServer
from broker.sasl.session import IllegalSaslState
from broker.sasl.session import SaslSession
from broker.sasl.session import SaslState
from client.security import ScramClient
from storage.scram_credentials import SCRAM_SHA_256
from storage.scram_credentials import SCRAM_SHA_512
from storage.scram_credentials import InvalidCredential
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore
from storage.scram_credentials import check_upsert

# RFC 7677, section 3: user "user", password "pencil".
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.fixture
def rfc_store(tmp_path: Path) -> ScramCredentialStore:
    store = ScramCredentialStore.in_data_dir(tmp_path)
    salted = SCRAM_SHA_256.salted_password("pencil", SALT, 4096)
    store.upsert(
        "user",
        SCRAM_SHA_256.name,
        ScramCredential.from_salted_password(SCRAM_SHA_256, SALT, salted, 4096),
    )
    return store


def test_scram_sha_256_matches_rfc_7677(rfc_store: ScramCredentialStore) -> None:
    server = ScramServer(SCRAM_SHA_256, rfc_store, server_nonce=lambda: SERVER_NONCE)
    assert server.step(CLIENT_FIRST) == SERVER_FIRST
    assert server.step(CLIENT_FINAL) == SERVER_FINAL
    assert (server.complete, server.user) == (True, "user")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda m: m.replace(b"p=dHzb", b"p=eHzb"),  # a wrong proof
        lambda m: m.replace(b"r=rOprNGfwEbeRWgbNEkqO%", b"r=rOprNGfwEbeRWgbNEkqO#"),  # nonce
        lambda m: m.replace(b"c=biws", b"c=eSws"),  # channel binding claimed
        lambda m: m.split(b",p=")[0],  # no proof
    ],
)
def test_scram_refuses_a_tampered_final_message(
    rfc_store: ScramCredentialStore, tamper: object
) -> None:
    server = ScramServer(SCRAM_SHA_256, rfc_store, server_nonce=lambda: SERVER_NONCE)
    server.step(CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed):
        server.step(tamper(CLIENT_FINAL))  # type: ignore[operator]
    assert not server.complete and server.user is None


def test_scram_refuses_an_unknown_user_and_another_mechanism(
    rfc_store: ScramCredentialStore,
) -> None:
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        ScramServer(SCRAM_SHA_256, rfc_store).step(b"n,,n=mallory,r=abc")
    with pytest.raises(AuthenticationFailed):  # "user" has no SCRAM-SHA-512 credential
        ScramServer(SCRAM_SHA_512, rfc_store).step(CLIENT_FIRST)


def test_scram_accepts_old_librdkafkas_doubled_client_nonce(
    rfc_store: ScramCredentialStore,
) -> None:
    """librdkafka < 2.6.1 sends r=<client nonce><whole nonce> (and signs what it sends);
    Kafka 3.8.1+ accepts a nonce that ends with the server's, and so must we (Debian's kcat)."""
    server = ScramServer(SCRAM_SHA_256, rfc_store, server_nonce=lambda: SERVER_NONCE)
    server.step(CLIENT_FIRST)
    without_proof = b"c=biws,r=rOprNGfwEbeRWgbNEkqO" + SERVER_FIRST.split(b",")[0][2:]
    auth_message = CLIENT_FIRST[3:] + b"," + SERVER_FIRST + b"," + without_proof
    salted = SCRAM_SHA_256.salted_password("pencil", SALT, 4096)
    client_key = SCRAM_SHA_256.hmac(salted, b"Client Key")
    signature = SCRAM_SHA_256.hmac(SCRAM_SHA_256.digest(client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server.step(without_proof + b",p=" + base64.b64encode(proof))
    assert server.user == "user"


async def test_session_plain_and_scram_share_one_user_database(tmp_path: Path) -> None:
    store = ScramCredentialStore.in_data_dir(tmp_path)
    store.upsert("alice", SCRAM_SHA_512.name, ScramCredential.from_password(SCRAM_SHA_512, "pw"))
    plain = SaslSession(("PLAIN", "SCRAM-SHA-512"), store)
    assert plain.handshake("PLAIN")
    assert await plain.authenticate(b"\0alice\0pw") == b""
    assert (plain.state, plain.principal) == (SaslState.COMPLETE, "User:alice")

    scram = SaslSession(("PLAIN", "SCRAM-SHA-512"), store)
    assert scram.handshake("SCRAM-SHA-512")
    client = ScramClient("sha512", "alice", "pw")
    server_first = await scram.authenticate(client.step(b""))
    server_final = await scram.authenticate(client.step(server_first))
    client.step(server_final)  # checks the server's signature
    assert client.done and scram.principal == "User:alice"


async def test_session_refuses_a_wrong_password_and_stays_failed(tmp_path: Path) -> None:
    store = ScramCredentialStore.in_data_dir(tmp_path)
    store.upsert("alice", SCRAM_SHA_256.name, ScramCredential.from_password(SCRAM_SHA_256, "pw"))
    session = SaslSession(("PLAIN",), store)
    assert not session.handshake("SCRAM-SHA-512")  # not enabled: the client may try another
    assert session.handshake("PLAIN")
    with pytest.raises(AuthenticationFailed):
        await session.authenticate(b"\0alice\0wrong")
    assert session.state is SaslState.FAILED and session.principal is None
    with pytest.raises(IllegalSaslState):
        await session.authenticate(b"\0alice\0pw")


async def test_session_refuses_tokens_before_a_handshake(tmp_path: Path) -> None:
    session = SaslSession(("PLAIN",), ScramCredentialStore.in_data_dir(tmp_path))
    with pytest.raises(IllegalSaslState):
        await session.authenticate(b"\0alice\0pw")
    assert session.state is SaslState.FAILED


def test_credential_file_keeps_no_password_and_survives_a_reload(tmp_path: Path) -> None:
    store = ScramCredentialStore.in_data_dir(tmp_path)
    store.upsert(
        "alice", SCRAM_SHA_512.name, ScramCredential.from_password(SCRAM_SHA_512, "s3cret")
    )
    store.save()
    text = (tmp_path / "scram-credentials.json").read_text()
    assert "s3cret" not in text
    saved = json.loads(text)["users"]["alice"]["SCRAM-SHA-512"]
    assert saved["iterations"] == 4096 and len(base64.b64decode(saved["salt"])) == 32
    again = ScramCredentialStore.in_data_dir(tmp_path).get("alice", SCRAM_SHA_512.name)
    assert again is not None and again.matches_password(SCRAM_SHA_512, "s3cret")
    assert not again.matches_password(SCRAM_SHA_512, "s3cret!")
    assert (tmp_path / "scram-credentials.json").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    ("user", "mechanism", "iterations"),
    [("", "SCRAM-SHA-256", 4096), ("a", "SCRAM-SHA-1", 4096), ("a", "SCRAM-SHA-256", 4095),
     ("a", "SCRAM-SHA-512", 16385)],
)  # fmt: skip
def test_credentials_kafka_would_refuse(user: str, mechanism: str, iterations: int) -> None:
    with pytest.raises(InvalidCredential):
        check_upsert(user, mechanism, iterations)
