"""The server side of SCRAM (RFC 5802, RFC 7677), as Kafka runs it over SaslAuthenticate.

Two rounds: client-first (user, client nonce) gets server-first (nonce, salt, iterations);
client-final (channel binding, nonce, proof) is checked against the stored key and gets
server-final (the server's signature). Only HMACs and hashes run here, no pbkdf2: cheap enough
for the event loop. Kafka's SCRAM extensions (`tokenauth=...`) are read and ignored.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable

from broker.sasl.errors import AuthenticationFailed
from storage.scram_credentials import Mechanism
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore

INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"


def _attributes(message: str) -> dict[str, str]:
    """`k=v,k=v` -> dict; a value may hold `=` (base64)."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise AuthenticationFailed(f"Invalid SCRAM message attribute {key!r}")
        out[key] = value
    return out


def _sasl_name(value: str) -> str:
    """RFC 5802's saslname: `=2C` is a comma, `=3D` an equals sign."""
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One exchange; `step` takes each client message and returns the server's answer."""

    def __init__(
        self,
        mechanism: Mechanism,
        credentials: ScramCredentialStore,
        server_nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        """`server_nonce`: fresh randomness per exchange (a test passes RFC 7677's)."""
        self._mechanism = mechanism
        self._server_nonce = server_nonce
        self._credentials = credentials
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._pending_user = ""
        self.user: str | None = None  # set once the proof is checked
        self.complete = False

    def step(self, token: bytes) -> bytes:
        """:raises AuthenticationFailed: a malformed message, an unknown user, a bad proof."""
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("SCRAM message is not UTF-8") from None
        if self._credential is None:
            return self._client_first(message)
        return self._client_final(message)

    def _client_first(self, message: str) -> bytes:
        # gs2-header: "n,," or "y,," (no channel binding), optionally with "a=authzid".
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise AuthenticationFailed("Invalid SCRAM client-first message")
        self._gs2_header = f"{parts[0]},{parts[1]},"
        self._client_first_bare = parts[2]
        attrs = _attributes(parts[2])
        if "n" not in attrs or "r" not in attrs:
            raise AuthenticationFailed("Invalid SCRAM client-first message")
        user = _sasl_name(attrs["n"])
        authzid = parts[1].removeprefix("a=")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: authorization id is not the user")
        credential = self._credentials.login(user, self._mechanism.name)
        if credential is None:
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        self._credential = credential
        self._pending_user = user
        self._nonce = attrs["r"] + self._server_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_b64 = message.rpartition(",p=")
        attrs = _attributes(without_proof) if sep else {}
        # RFC 5802 wants the nonce back unchanged; librdkafka before 2.6.1 prepends its own
        # nonce once more, so Kafka (3.8.1+, after CVE-2024-56128) checks the end: so do we.
        if not sep or not attrs.get("r", "").endswith(self._nonce):
            raise AuthenticationFailed("Invalid SCRAM client-final message")
        if attrs.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise AuthenticationFailed("Invalid SCRAM channel binding")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except binascii.Error:
            raise AuthenticationFailed("Invalid SCRAM client proof") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        m = self._mechanism
        signature = m.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(m.digest(client_key), credential.stored_key):
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        self.user = self._pending_user
        self.complete = True
        server_signature = m.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
