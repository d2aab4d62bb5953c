"""The server side of PLAIN (RFC 4616), checked against the SCRAM credential store.

The password is salted again with the stored salt and iterations (pbkdf2, milliseconds of
CPU), so the check runs in a thread, off the event loop. The strongest stored mechanism is
used.
"""

from __future__ import annotations

import asyncio

from broker.sasl.errors import AuthenticationFailed
from broker.sasl.scram import INVALID_CREDENTIALS
from storage.scram_credentials import SCRAM_SHA_256
from storage.scram_credentials import SCRAM_SHA_512
from storage.scram_credentials import ScramCredentialStore


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
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = self._credentials.get(user, mechanism.name)
            if credential is not None:
                ok = await asyncio.get_running_loop().run_in_executor(
                    None, credential.matches_password, mechanism, password
                )
                if not ok:
                    break
                self.user = user
                self.complete = True
                return b""
        raise AuthenticationFailed(INVALID_CREDENTIALS)
