"""TLS between the processes of `shoal serve --processes N` (issue 33): what the supervisor
refuses before starting any process, and how a process reaches the others.

Kafka's brokers reach each other with the inter-broker listener's own `ssl.*` settings
(`TransactionMarkerChannelManager` and the other senders:
`ChannelBuilders.clientChannelBuilder(interBrokerSecurityProtocol, ..., interBrokerListenerName)`;
`DefaultSslEngineFactory`: the keystore as the client certificate, the truststore, or the JVM's
CAs without one, to verify the other broker, and `ssl.endpoint.identification.algorithm`,
default `https` in `SslConfigs`, checking the host name in client mode). Certificates here are
made at test time, each with the names and key usages a case needs.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.oid import NameOID

from broker.config import BrokerConfig
from broker.node_identity import NODE_USER
from broker.node_identity import node_security
from broker.node_tls import verified_name
from broker.supervisor import check
from tests.tls_files import pkcs12_stores

_NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class _Issuer:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _ca(cn: str) -> _Issuer:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(days=1))
        .not_valid_after(_NOW + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _Issuer(key, cert)


def _keystore(
    path: Path,
    names: tuple[str, ...],
    issuer: _Issuer | None,
    usages: tuple[x509.ObjectIdentifier, ...] = (
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
    ),
) -> Path:
    """A PEM keystore (key and chain) for `names`, issued by `issuer` (None: self-signed)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    subject = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "shoal-node"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Shoal Tests"),
    ])  # fmt: skip
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(days=1))
        .not_valid_after(_NOW + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
            critical=False,
        )
    cert = builder.sign(issuer.key if issuer else key, hashes.SHA256())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ) + cert.public_bytes(serialization.Encoding.PEM)
    if issuer is not None:
        pem += issuer.cert.public_bytes(serialization.Encoding.PEM)
    path.write_bytes(pem)
    return path


def _truststore(path: Path, issuer: _Issuer) -> Path:
    path.write_bytes(issuer.cert.public_bytes(serialization.Encoding.PEM))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """A CA, another CA, and keystores for 127.0.0.1 and localhost issued by the first."""
    ca, other = _ca("Shoal Tests CA"), _ca("Another CA")
    return {
        "ca": str(_truststore(tmp_path / "ca.pem", ca)),
        "other_ca": str(_truststore(tmp_path / "other.pem", other)),
        "node": str(_keystore(tmp_path / "node.pem", ("127.0.0.1", "localhost"), ca)),
        "self_signed": str(_keystore(tmp_path / "self.pem", ("127.0.0.1",), None)),
        "server_only": str(
            _keystore(
                tmp_path / "server-only.pem",
                ("127.0.0.1",),
                ca,
                (ExtendedKeyUsageOID.SERVER_AUTH,),
            )
        ),
    }


def _config(listeners: str = "SSL://127.0.0.1:9093", **values: object) -> BrokerConfig:
    return BrokerConfig.load(
        environ={}, overrides={"metrics.port": -1, "listeners": listeners, **values}
    )


def _ssl(files: dict[str, str], keystore: str = "node", **values: object) -> BrokerConfig:
    settings: dict[str, object] = {"ssl.keystore.location": files[keystore], **values}
    if "ssl.truststore.location" not in settings:
        settings["ssl.truststore.location"] = files["ca"]
    return _config(**settings)


def test_an_ssl_or_sasl_ssl_inter_node_listener_is_served(files: dict[str, str]) -> None:
    """Each was refused before (the processes held no certificates)."""
    assert check(_ssl(files), 2) is None
    for auth in ("requested", "required"):
        assert check(_ssl(files, **{"ssl.client.auth": auth}), 2) is None
    sasl_ssl = _ssl(
        files,
        listeners="SASL_SSL://127.0.0.1:9093",
        **{"sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.client.auth": "required"},
    )
    assert check(sasl_ssl, 2) is None
    # A wildcard listener advertised as a name the certificate carries: checked for that name
    # (what Kafka's brokers connect to), though the processes connect to 127.0.0.1.
    advertised = _ssl(
        files,
        listeners="SSL://0.0.0.0:9093",
        **{"advertised.listeners": "SSL://localhost:19093"},
    )
    assert verified_name(advertised) == "localhost"
    assert check(advertised, 2) is None
    # Named the other listener: an SSL one beside a PLAINTEXT inter-node one, as before.
    beside = _ssl(files, listeners="SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9095")
    assert beside.inter_node_listener.name == "PLAINTEXT"
    assert check(beside, 2) is None


@pytest.mark.parametrize(
    ("keystore", "values", "reasons"),
    [
        (  # no truststore: only the system's CAs, which do not know a private CA
            "node",
            {"ssl.truststore.location": ""},
            ("no ssl.truststore.location is set", "set ssl.truststore.location to the CA"),
        ),
        (  # a self-signed keystore and no truststore: the brief's case
            "self_signed",
            {"ssl.truststore.location": ""},
            ("self-signed certificate", "set ssl.truststore.location"),
        ),
        (
            "node",
            {"ssl.truststore.location": "other_ca"},
            ("ssl.truststore.location does not verify", "add the CA that issued it"),
        ),
        (  # advertised as a name the certificate does not carry: Kafka's brokers would check it
            "node",
            {"advertised.listeners": "SSL://broker.example:19093"},
            (
                "for the name broker.example",
                "give it a subjectAltName for broker.example",
                "ssl.endpoint.identification.algorithm= (empty)",
            ),
        ),
        (  # the node's certificate shown as a client's, without the clientAuth key usage
            "server_only",
            {"ssl.client.auth": "required"},
            ("with ssl.client.auth=required the listener refuses", "clientAuth"),
        ),
        (
            "node",
            {"ssl.keystore.location": "/nonexistent/broker.pem"},
            ("listener SSL (inter.broker.listener.name)", "which do not load"),
        ),
    ],
)
def test_trust_settings_that_cannot_work_are_refused_before_any_process_starts(
    files: dict[str, str], keystore: str, values: dict[str, str], reasons: tuple[str, ...]
) -> None:
    values = {k: files.get(v, v) for k, v in values.items()}
    refused = check(_ssl(files, keystore, **values), 2)
    assert refused is not None
    assert "\n" not in refused
    for reason in reasons:
        assert reason in refused, refused


def test_an_empty_endpoint_identification_checks_the_chain_only(files: dict[str, str]) -> None:
    """Kafka's operators turn the host-name check off this way (never silently); the chain is
    still verified."""
    off = {"ssl.endpoint.identification.algorithm": ""}
    advertised = {"advertised.listeners": "SSL://broker.example:19093"}
    assert check(_ssl(files, **advertised, **off), 2) is None
    refused = check(_ssl(files, **advertised, **off, **{"ssl.truststore.location": ""}), 2)
    assert refused is not None and "not verify the certificate" in refused
    with pytest.raises(ValueError, match=r"ssl\.endpoint\.identification\.algorithm"):
        _ssl(files, **{"ssl.endpoint.identification.algorithm": "ldaps"})


def test_a_process_reaches_the_others_with_the_listener_settings(files: dict[str, str]) -> None:
    """SSL: TLS with the keystore and truststore, the host name checked; SASL_SSL: the same, and
    the login as the processes' own user; PLAINTEXT: nothing."""
    config = _ssl(files, processes=2, **{"advertised.listeners": "SSL://localhost:19093"})
    security = node_security(config, "secret")
    assert security is not None and security.protocol == "SSL" and not security.sasl
    assert security.server_hostname == "localhost"
    context = security.ssl_context()
    assert context is not None and context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    sasl_ssl = _ssl(
        files,
        listeners="SASL_SSL://127.0.0.1:9093",
        processes=2,
        **{"sasl.enabled.mechanisms": "SCRAM-SHA-256"},
    )
    security = node_security(sasl_ssl, "secret")
    assert security is not None and security.tls and security.sasl
    assert (security.mechanism, security.username) == ("SCRAM-SHA-256", NODE_USER)
    assert security.server_hostname == "127.0.0.1"
    off = _ssl(files, processes=2, **{"ssl.endpoint.identification.algorithm": ""})
    security = node_security(off, "secret")
    assert security is not None
    context = security.ssl_context()
    assert context is not None and not context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert node_security(_config("PLAINTEXT://127.0.0.1:9092", processes=2), "secret") is None


def test_pkcs12_stores_serve_the_processes_too(files: dict[str, str], tmp_path: Path) -> None:
    """The processes load the stores as the listeners do (`ssl.keystore.type=PKCS12`); a wrong
    store password is refused before any process starts."""
    keystore, truststore = pkcs12_stores(
        Path(files["node"]), Path(files["ca"]), tmp_path, b"store-secret"
    )
    stores = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": "store-secret",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(truststore),
        "ssl.truststore.password": "store-secret",
        "ssl.client.auth": "required",
    }
    assert check(_config(**stores), 2) is None
    refused = check(_config(**{**stores, "ssl.truststore.password": "wrong"}), 2)
    assert refused is not None and "which do not load" in refused
