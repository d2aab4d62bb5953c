"""The server side of PLAIN (RFC 4616), checked against the SCRAM credential store.

The password is salted again with the stored salt and iterations (pbkdf2, milliseconds of
CPU), so the check runs in a thread, off the event loop. The strongest stored mechanism is
used.
"""

from __future__ import annotations

import asyncio

from broker.sasl.errors import AuthenticationFailed
from broker.sasl.scram import INVALID_CREDENTIALS
from storage.scram_credentials import DEFAULT_ITERATIONS
from storage.scram_credentials import SCRAM_SHA_256
from storage.scram_credentials import SCRAM_SHA_512
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore

_UNKNOWN_USER = ScramCredential(bytes(32), DEFAULT_ITERATIONS, bytes(64), bytes(64))


class PlainServer:
    def __init__(self, credentials: ScramCredentialStore) -> None:
        self._credentials = credentials
        self.user: str | None = None
        self.complete = False

    async def step(self, token: bytes) -> bytes:
        """:raises AuthenticationFailed: a malformed message, an unknown user, a bad password."""
        try:
            authzid, user, password = token.decode().split("\0")
        except (UnicodeDecodeError, ValueError):
            raise AuthenticationFailed("Invalid PLAIN message") from None
        if not user or (authzid and authzid != user):
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        found = next(
            (
                (m, c)
                for m in (SCRAM_SHA_512, SCRAM_SHA_256)
                if (c := self._credentials.login(user, m.name)) is not None
            ),
            None,
        )
        # An unknown user costs the same pbkdf2 as a known one: the time to refuse must not
        # tell which user names exist.
        mechanism, credential = found or (SCRAM_SHA_512, _UNKNOWN_USER)
        ok = await asyncio.get_running_loop().run_in_executor(
            None, credential.matches_password, mechanism, password
        )
        if not ok or found is None:
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        self.user = user
        self.complete = True
        return b""
