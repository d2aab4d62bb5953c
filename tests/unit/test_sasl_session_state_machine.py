"""SaslSession against a reference model of Kafka's SASL order, driven by Hypothesis.

Any sequence of handshakes and logins (good or bad, PLAIN or SCRAM, at any moment) must leave
the session where the model says: a first handshake with an enabled mechanism starts the
exchange; anything out of order before login fails the session for good, and after login is
refused while the session stays logged in; a principal exists exactly when the exchange
completed; a failed or completed session never changes again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import invariant
from hypothesis.stateful import rule

from broker.sasl.errors import AuthenticationFailed
from broker.sasl.session import IllegalSaslState
from broker.sasl.session import SaslSession
from broker.sasl.session import SaslState
from client.security import PlainClient
from client.security import ScramClient
from storage.scram_credentials import MECHANISMS
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore
from tests.hypothesis_profiles import examples

ENABLED = ("PLAIN", "SCRAM-SHA-512")
OFFERED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
PASSWORD = "pw"

STORE = ScramCredentialStore(Path("never-written.json"))  # in memory only: never saved
for _name, _mechanism in MECHANISMS.items():  # alice has both; PLAIN checks the strongest
    STORE.upsert("alice", _name, ScramCredential.from_password(_mechanism, PASSWORD))


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.session = SaslSession(ENABLED, STORE)
        self.state = SaslState.HANDSHAKE  # the model
        self.mechanism: str | None = None

    @rule(mechanism=st.sampled_from(OFFERED))
    def handshake(self, mechanism: str) -> None:
        try:
            picked = self.session.handshake(mechanism)
        except IllegalSaslState:
            assert self.state is not SaslState.HANDSHAKE
            self._out_of_order()
            return
        assert self.state is SaslState.HANDSHAKE
        assert picked == (mechanism in ENABLED)
        if picked:
            self.state, self.mechanism = SaslState.AUTHENTICATE, mechanism

    @rule(good=st.booleans())
    def login(self, good: bool) -> None:
        """The client's whole exchange for the mechanism picked (or PLAIN if none was)."""
        mechanism = self.mechanism or "PLAIN"
        password = PASSWORD if good else "not-" + PASSWORD
        try:
            asyncio.run(self._exchange(mechanism, password))
        except IllegalSaslState:
            assert self.state is not SaslState.AUTHENTICATE
            self._out_of_order()
            return
        except AuthenticationFailed:
            assert self.state is SaslState.AUTHENTICATE and not good
            self.state = SaslState.FAILED
            return
        assert self.state is SaslState.AUTHENTICATE and good
        self.state = SaslState.COMPLETE

    def _out_of_order(self) -> None:
        if self.state is not SaslState.COMPLETE:
            self.state = SaslState.FAILED

    async def _exchange(self, mechanism: str, password: str) -> None:
        client: PlainClient | ScramClient = (
            PlainClient("alice", password)
            if mechanism == "PLAIN"
            else ScramClient(HASHES[mechanism], "alice", password)
        )
        challenge = b""
        while not client.done:
            token = client.step(challenge)
            if client.done and not token:
                break
            challenge = await self.session.authenticate(token)

    @invariant()
    def agrees_with_the_model(self) -> None:
        assert self.session.state is self.state
        assert (self.session.principal is not None) == (self.state is SaslState.COMPLETE)
        if self.session.principal is not None:
            assert self.session.principal == "User:alice"
        assert self.session.authenticated == (self.state is SaslState.COMPLETE)


SessionMachine.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=6, deadline=None
)
TestSaslSession = SessionMachine.TestCase
