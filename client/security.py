"""How a client reaches a secured listener: TLS and SASL (PLAIN, SCRAM-SHA-256/512).

Settings use the names Kafka's clients read from a `--command-config` file:
`security.protocol`, `sasl.mechanism`, `sasl.username`/`sasl.password` (librdkafka's) or
`sasl.jaas.config` (Java's `username="..." password="..."`), `ssl.ca.location` or a PEM
`ssl.truststore.location`, and `ssl.certificate.location`/`ssl.key.location` for mutual TLS.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

_JAAS = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class AuthenticationError(ConnectionError):
    """The broker refused the credentials, or the SASL exchange went wrong."""


class TlsHandshakeError(ConnectionError):
    """The TLS handshake failed: a certificate refused, or a listener that does not speak TLS."""


@dataclass(frozen=True, slots=True)
class Security:
    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    username: str = ""
    password: str = ""
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    # A TLS context made by the caller (the broker's own links to its other processes:
    # `broker.node_tls`), used instead of one made from the files above.
    context: ssl.SSLContext | None = None
    # The name the broker's certificate must carry, when it is not the host connected to.
    server_hostname: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> Security:
        """:raises ValueError: an unknown security protocol or SASL mechanism."""
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"security.protocol={protocol} is not supported")
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "SCRAM-SHA-512"))
        if mechanism not in ("PLAIN", *_HASHES):
            raise ValueError(f"sasl.mechanism={mechanism} is not supported")
        jaas = dict(_JAAS.findall(props.get("sasl.jaas.config", "")))
        return cls(
            protocol=protocol,
            mechanism=mechanism,
            username=props.get("sasl.username", jaas.get("username", "")),
            password=props.get("sasl.password", jaas.get("password", "")),
            ca_file=props.get("ssl.ca.location", props.get("ssl.truststore.location")),
            cert_file=props.get("ssl.certificate.location"),
            key_file=props.get("ssl.key.location"),
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        if self.context is not None:
            return self.context
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def sasl_client(self) -> PlainClient | ScramClient:
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self.password)
        return ScramClient(_HASHES[self.mechanism], self.username, self.password)


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()
        self.done = False

    def step(self, challenge: bytes) -> bytes:
        self.done = True
        return self._token


class ScramClient:
    """RFC 5802's client: client-first, then client-final with the proof; the server's
    signature in server-final is checked, so a broker without the credential cannot pass."""

    def __init__(self, hash_name: str, username: str, password: str) -> None:
        self._hash = hash_name
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""
        self._round = 0
        self.done = False

    def step(self, challenge: bytes) -> bytes:
        """:raises AuthenticationError: a server message that does not check out."""
        self._round += 1
        if self._round == 1:
            return f"n,,{self._first_bare}".encode()
        if self._round == 2:
            return self._final(challenge.decode())
        expected = base64.b64encode(hmac.digest(self._server_key, self._auth_message, self._hash))
        if challenge != b"v=" + expected:
            raise AuthenticationError("the broker's SCRAM signature does not match")
        self.done = True
        return b""

    def _final(self, server_first: str) -> bytes:
        attrs = dict(part.split("=", 1) for part in server_first.split(","))
        if not attrs.get("r", "").startswith(self._nonce):
            raise AuthenticationError("the broker's SCRAM nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(
            self._hash, self._password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        without_proof = f"c=biws,r={attrs['r']}"
        self._auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = hmac.digest(stored_key, self._auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = hmac.digest(salted, b"Server Key", self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
