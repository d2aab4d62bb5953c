"""TLS between the processes of `shoal serve --processes N`, on an SSL or SASL_SSL inter-node
listener (docs/multicore.md, "TLS between the processes").

Kafka's brokers open their inter-broker connections with the inter-broker listener's own
`ssl.*` settings (`TransactionMarkerChannelManager` and the other senders build
`ChannelBuilders.clientChannelBuilder(interBrokerSecurityProtocol, ..., interBrokerListenerName,
...)`, which reads `listener.name.<name>.ssl.*` over `ssl.*`): the keystore is the client
certificate, sent when the other side asks for one (`ssl.client.auth`); the truststore verifies
the other broker (the JVM's CAs when none is set: `DefaultSslEngineFactory.getTrustManagers`);
`ssl.endpoint.identification.algorithm` (default `https`, `SslConfigs`) checks the host name the
broker connected to, the other broker's advertised one. Shoal has one set of `ssl.*` for every
listener (no listener-prefixed ones), so those.

The processes connect to the listener's own address (127.0.0.1 for a wildcard: one host, and
the advertised name may not lead back to it), and check the certificate for the name Kafka's
brokers would have connected to: the listener's advertised host, else its configured one (this
host's name for a wildcard, as Metadata advertises it). So the certificate clients verify serves
the nodes too, and verification is never off unless the operator empties the setting.

The context is made once, when the process starts, as the listeners' own (`broker.tls`, read in
`Server._listen`), which do not follow keystore changes either: a new certificate takes a
restart. Before starting any process the supervisor runs the handshake in memory with the
listener's server context and this client context (`tls_refusal`), so settings that cannot work
are refused with what to set, instead of every cross-node request failing later.
"""

from __future__ import annotations

import ssl

from broker.config import BrokerConfig
from broker.errors import BrokerException
from broker.listeners import advertised_endpoint
from broker.tls import load_keystore
from broker.tls import load_truststore
from broker.tls import server_context

_HANDSHAKE_ROUNDS = 10  # TLS 1.2 and 1.3 finish in 2-3 exchanges; a bound, not a budget
# OpenSSL's verify codes for a certificate that does not name the host (X509_V_ERR_*).
_NAME_MISMATCH = (62, 64)


def checks_host(config: BrokerConfig) -> bool:
    return config.ssl_endpoint_identification_algorithm.strip().lower() == "https"


def verified_name(config: BrokerConfig) -> str:
    """The name another process's certificate must carry: what Kafka's brokers would connect
    to, the inter-node listener's advertised host (its own host when not advertised)."""
    inter = config.inter_node_listener
    host, _ = advertised_endpoint(inter, inter.port, config.advertised_list)
    return host


def client_context(config: BrokerConfig) -> ssl.SSLContext:
    """The context of this process's connections to the others.

    :raises OSError, ssl.SSLError: a file is missing or does not load (as `server_context`)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED: the chain is checked
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = checks_host(config)
    load_keystore(context, config)  # shown when the other side asks (ssl.client.auth)
    if config.ssl_truststore_location:
        load_truststore(context, config)
    else:  # Kafka's brokers then trust the JVM's CAs
        context.load_default_certs()
    return context


class _Failed(BrokerException):
    def __init__(self, server_side: bool, error: ssl.SSLError) -> None:
        super().__init__(str(error))
        self.server_side = server_side
        self.error = error


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, name: str) -> None:
    """One TLS handshake in memory, as a node would make it with another.

    :raises _Failed: a side refused the other's certificate (or anything else)."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    ends = [
        (False, client.wrap_bio(c_in, c_out, server_hostname=name)),
        (True, server.wrap_bio(s_in, s_out, server_side=True)),
    ]
    done: set[bool] = set()
    for _ in range(_HANDSHAKE_ROUNDS):
        for server_side, end in ends:
            if server_side in done:
                continue
            try:
                end.do_handshake()
                done.add(server_side)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as e:
                raise _Failed(server_side, e) from e
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if len(done) == 2:
            return
    raise _Failed(False, ssl.SSLError("the handshake did not finish"))


def tls_refusal(config: BrokerConfig) -> str | None:
    """Why the processes could not reach each other over TLS on the inter-node listener with
    these settings (one line saying what to set), or None (not TLS, or it works)."""
    inter = config.inter_node_listener
    if not inter.tls:
        return None
    what = (
        f"the processes send each other requests over TLS on listener {inter.name} "
        f"(inter.broker.listener.name) with its ssl.* settings"
    )
    try:
        server, client = server_context(config), client_context(config)
    except (OSError, ssl.SSLError) as e:
        return f"{what}, which do not load: {e}"
    name = verified_name(config)
    try:
        _handshake(server, client, name)
    except _Failed as failed:
        return f"{what}, and {_reason(config, name, failed)}"
    return None


def _reason(config: BrokerConfig, name: str, failed: _Failed) -> str:
    e = failed.error
    if failed.server_side:  # the listener refused the node's own certificate as a client's
        return (
            f"with ssl.client.auth={config.ssl_client_auth} the listener refuses the certificate "
            f"of ssl.keystore.location that each process shows the others ({e.reason or e}): "
            "it must chain to a CA in ssl.truststore.location and allow client authentication "
            "(extendedKeyUsage clientAuth, or no extendedKeyUsage)"
        )
    if not isinstance(e, ssl.SSLCertVerificationError):
        return f"the TLS handshake between two processes fails ({e})"
    if e.verify_code in _NAME_MISMATCH:
        return (
            f"each checks the other's certificate for the name {name} (the listener's advertised "
            "host, else its own), as ssl.endpoint.identification.algorithm=https does, but the "
            f"certificate of ssl.keystore.location does not carry it ({e.verify_message}): give "
            f"it a subjectAltName for {name}, advertise a name it carries for the listener in "
            "advertised.listeners, or set ssl.endpoint.identification.algorithm= (empty) to "
            "check the certificate's chain only"
        )
    if not config.ssl_truststore_location:
        return (
            "no ssl.truststore.location is set, so each trusts only the system's CAs, which do "
            f"not verify the certificate of ssl.keystore.location ({e.verify_message}): set "
            "ssl.truststore.location to the CA certificate that issued it"
        )
    return (
        "ssl.truststore.location does not verify the certificate of ssl.keystore.location "
        f"({e.verify_message}): add the CA that issued it to the truststore"
    )
