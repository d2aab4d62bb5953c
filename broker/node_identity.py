"""Who the processes of `shoal serve --processes N` are to one another on a secured listener.

Their requests to each other (transaction verification and markers, topic auto-creation, and
the ACL and SCRAM changes forwarded to node 0) are Kafka's inter-broker requests, which Kafka
authorizes as the broker's own principal (CLUSTER_ACTION, or the ALTER of the forwarded
change). Here the supervisor makes a random secret per run and gives it to each process in its
environment (`SHOAL_NODE_SECRET`: never on a command line, which `ps` shows, never in a file).
Each process derives from it, in memory only, SCRAM credentials of the reserved user
`__shoal_node`, logs in to the others as that user on a SASL listener, and its authorizer
counts `User:__shoal_node` among the super users. No client can log in as it without the
secret: the reserved credentials win over any stored user of that name.

On SASL_SSL they log in the same way, over TLS (`broker.node_tls`). On SSL the principal is the
certificate's, as Kafka's inter-broker principal is its broker certificate's DN: with
`ssl.client.auth=required|requested` each process shows the keystore's certificate, so
`User:<its subject>` (list it in `super.users`); with `none`, `User:ANONYMOUS`. On a PLAINTEXT
listener every connection is `User:ANONYMOUS`, the processes' own too, as Kafka's brokers are
on a PLAINTEXT inter-broker listener: give that principal CLUSTER_ACTION (or make it a super
user) for transactions across processes (docs/multicore.md).
"""

from __future__ import annotations

import os
import secrets

from broker.config import BrokerConfig
from broker.listeners import PLAINTEXT
from broker.node_tls import client_context
from broker.node_tls import verified_name
from broker.principal import user
from client.security import Security
from storage.scram_credentials import MECHANISMS
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore

SECRET_ENV = "SHOAL_NODE_SECRET"
NODE_USER = "__shoal_node"
NODE_PRINCIPAL = user(NODE_USER)
# The node links' mechanism: the first of these the listener enables.
_PREFERRED = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def node_secret(config: BrokerConfig) -> str | None:
    """The secret the supervisor gave this process; None with N = 1 or when started by hand."""
    if config.ownership.single:
        return None
    return os.environ.get(SECRET_ENV) or None


def reserve(store: ScramCredentialStore, secret: str) -> None:
    """Let the processes log in as `NODE_USER` with `secret`, by every SCRAM mechanism (PLAIN
    checks a password against them too). Two pbkdf2 runs: milliseconds, once at start."""
    store.reserved[NODE_USER] = {
        m.name: ScramCredential.from_password(m, secret) for m in MECHANISMS.values()
    }


def node_mechanism(config: BrokerConfig) -> str | None:
    """The SASL mechanism the processes log in to each other with, on the inter-node listener
    (`inter.broker.listener.name`) when it is SASL_PLAINTEXT or SASL_SSL; None when they
    cannot."""
    if not config.inter_node_listener.sasl:
        return None
    enabled = config.sasl_mechanisms
    return next((m for m in _PREFERRED if m in enabled), None)


def node_security(config: BrokerConfig, secret: str | None) -> Security | None:
    """How this process reaches the others on the inter-node listener: over TLS on SSL and
    SASL_SSL (`broker.node_tls`: the listener's keystore and truststore), logged in as
    `NODE_USER` on SASL_PLAINTEXT and SASL_SSL; None (a plain connection) on PLAINTEXT, or on a
    SASL listener without a secret.

    :raises OSError, ssl.SSLError: on SSL and SASL_SSL, the keystore or truststore does not
    load (the listeners could not start either)."""
    inter = config.inter_node_listener
    mechanism = node_mechanism(config)
    if inter.security_protocol == PLAINTEXT or (
        inter.sasl and (secret is None or mechanism is None)
    ):
        return None
    context = client_context(config) if inter.tls else None
    name = verified_name(config) if inter.tls else None
    if not inter.sasl:  # SSL
        return Security(inter.security_protocol, context=context, server_hostname=name)
    assert secret is not None and mechanism is not None
    return Security(
        inter.security_protocol, mechanism, NODE_USER, secret, context=context, server_hostname=name
    )
