"""TLS for SSL and SASL_SSL listeners: Python's `ssl` on asyncio, PEM files as Kafka reads them
(or PKCS12 stores, `ssl.keystore.type=PKCS12`, converted by `broker.keystores`).

`ssl.keystore.location` is one PEM file with the private key (encrypted when
`ssl.key.password` is set) and the certificate chain; `ssl.truststore.location` holds the CA
certificates that client certificates must chain to (`ssl.client.auth=requested|required`).
A client certificate names the connection's principal the way Kafka's default principal
builder does: the subject's RFC 2253 form, `User:CN=alice,OU=eng,O=Example`.
"""

from __future__ import annotations

import ssl
from typing import Any

from broker import keystores
from broker.config import BrokerConfig
from broker.principal import user

_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
# X.500 attribute short names, as Java's X500Principal.getName() writes them (RFC 2253).
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_RFC2253_SPECIAL = ',+"\\<>;'


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """:raises OSError, ssl.SSLError: a file is missing or unreadable, a wrong key password, a
    PKCS12 store that does not open (not PKCS12, a wrong store password)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # Kafka's ssl.enabled.protocols
    load_keystore(context, config)
    context.verify_mode = _CLIENT_AUTH[config.ssl_client_auth]
    if config.ssl_truststore_location:
        load_truststore(context, config)
    return context


def load_keystore(context: ssl.SSLContext, config: BrokerConfig) -> None:
    """`ssl.keystore.location` (PEM or PKCS12) into `context`: the server's certificate, and
    the client certificate of the processes' own connections (`broker.node_tls`).

    :raises OSError, ssl.SSLError: as `server_context`."""
    if config.ssl_keystore_type == "PKCS12":
        keystores.load_keystore(
            context,
            config.ssl_keystore_location,
            config.ssl_keystore_password or config.ssl_key_password,
        )
    else:
        context.load_cert_chain(
            config.ssl_keystore_location, password=config.ssl_key_password or None
        )


def load_truststore(context: ssl.SSLContext, config: BrokerConfig) -> None:
    """`ssl.truststore.location` (PEM or PKCS12) into `context` as its CA certificates.

    :raises OSError, ssl.SSLError: as `server_context`."""
    if config.ssl_truststore_type == "PKCS12":
        cadata = keystores.truststore_pem(
            config.ssl_truststore_location, config.ssl_truststore_password
        )
        context.load_verify_locations(cadata=cadata)
    else:
        context.load_verify_locations(cafile=config.ssl_truststore_location)


def _escape(value: str) -> str:
    out = "".join(f"\\{c}" if c in _RFC2253_SPECIAL else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


def subject_name(peercert: dict[str, Any]) -> str:
    """The certificate subject in RFC 2253 order: most specific attribute first."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """`User:<subject>` of a verified client certificate, or None (no certificate)."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    return user(subject_name(cert))
