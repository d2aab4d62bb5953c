"""One connection's SASL state: handshake, then tokens until the mechanism completes.

Kafka's order (SaslServerAuthenticator): ApiVersions may come first, then SaslHandshake picks
a mechanism, then SaslAuthenticate carries its tokens. Until the exchange completes no other
request is served; the connection is closed instead, as Kafka does. A failed exchange is
answered SASL_AUTHENTICATION_FAILED and then the connection is closed.
"""

from __future__ import annotations

import enum

from broker.errors import BrokerException
from broker.principal import user
from broker.sasl.errors import AuthenticationFailed
from broker.sasl.plain import PlainServer
from broker.sasl.scram import ScramServer
from storage.scram_credentials import MECHANISMS
from storage.scram_credentials import ScramCredentialStore


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class IllegalSaslState(BrokerException):
    """A SASL request out of order (a second handshake, tokens before a handshake); before
    login the session is then failed, so the connection closes."""


class SaslSession:
    def __init__(self, enabled: tuple[str, ...], credentials: ScramCredentialStore) -> None:
        self.enabled = enabled
        self._credentials = credentials
        self._server: ScramServer | PlainServer | None = None
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        # After a v0 handshake the tokens come as bare size-prefixed frames, not as
        # SaslAuthenticate requests (Kafka before 1.0; old librdkafka builds still ask for v0).
        self.raw_tokens = False

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def _out_of_order(self) -> None:
        """Before login, a SASL request out of order ends the connection (Kafka's authenticator
        closes it); after login it is only refused (Kafka's request handler answers
        ILLEGAL_SASL_STATE), and the connection stays logged in."""
        if self.state is not SaslState.COMPLETE:
            self.state = SaslState.FAILED

    @property
    def expects_raw_token(self) -> bool:
        return self.raw_tokens and self.state is SaslState.AUTHENTICATE

    def handshake(self, mechanism: str, *, raw_tokens: bool = False) -> bool:
        """Pick `mechanism`; False when it is not enabled (the client may try another).

        :raises IllegalSaslState: not the first handshake of this connection.
        """
        if self.state is not SaslState.HANDSHAKE:
            self._out_of_order()
            raise IllegalSaslState(f"SaslHandshake in state {self.state.value}")
        if mechanism not in self.enabled:
            return False
        scram = MECHANISMS.get(mechanism)
        self._server = (
            ScramServer(scram, self._credentials) if scram else PlainServer(self._credentials)
        )
        self.mechanism = mechanism
        self.raw_tokens = raw_tokens
        self.state = SaslState.AUTHENTICATE
        return True

    async def authenticate(self, token: bytes) -> bytes:
        """One client token in, the server's token out.

        :raises IllegalSaslState: no mechanism picked yet, or the exchange is over.
        :raises AuthenticationFailed: the exchange failed; the session stays failed.
        """
        server = self._server
        if self.state is not SaslState.AUTHENTICATE or server is None:
            self._out_of_order()
            raise IllegalSaslState(f"SaslAuthenticate in state {self.state.value}")
        try:
            if isinstance(server, PlainServer):
                answer = await server.step(token)
            else:
                answer = server.step(token)
        except AuthenticationFailed:
            self.state = SaslState.FAILED
            raise
        if server.complete and server.user is not None:
            self.principal = user(server.user)
            self.state = SaslState.COMPLETE
        return answer
