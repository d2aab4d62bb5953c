"""Certificates made at test time (trustme): a CA, a server certificate for 127.0.0.1 and a
client certificate, written as the PEM files a broker and its clients read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

trustme = pytest.importorskip("trustme", reason="trustme (the test extra) makes certificates")

CLIENT_SUBJECT = "CN=alice,OU=payments,O=Shoal Tests"  # RFC 2253: most specific first


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path  # the truststore: the CA certificate
    keystore: Path  # the server's private key and certificate chain
    client_cert: Path  # the client's certificate chain
    client_key: Path


def make_tls_files(directory: Path, *names: str) -> TlsFiles:
    """`names`: more names the server certificate carries besides 127.0.0.1 and localhost."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="Shoal Tests CA")
    server = ca.issue_cert("127.0.0.1", "localhost", *names)
    client = ca.issue_cert(
        "alice@example.org",
        common_name="alice",
        organization_name="Shoal Tests",
        organization_unit_name="payments",
    )
    files = TlsFiles(
        ca=directory / "ca.pem",
        keystore=directory / "server.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(files.keystore))
    for i, blob in enumerate(client.cert_chain_pems):
        blob.write_to_path(str(files.client_cert), append=i > 0)
    client.private_key_pem.write_to_path(str(files.client_key))
    return files


def pkcs12_stores(
    keystore_pem: Path, ca_pem: Path, directory: Path, password: bytes
) -> tuple[Path, Path]:
    """A PEM keystore (key and chain) and its CA as PKCS12 files (as `keytool`/`openssl pkcs12`
    make them): a keystore with the key and chain, and a truststore holding only the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from cryptography.hazmat.primitives.serialization import pkcs12

    pem = keystore_pem.read_bytes()
    key = load_pem_private_key(pem, None)
    cert, *chain = x509.load_pem_x509_certificates(pem)
    ca = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    encryption = BestAvailableEncryption(password)
    keystore, truststore = directory / "server.p12", directory / "truststore.p12"
    keystore.write_bytes(
        pkcs12.serialize_key_and_certificates(b"server", key, cert, chain or None, encryption)  # type: ignore[arg-type]
    )
    truststore.write_bytes(
        pkcs12.serialize_key_and_certificates(b"ca", None, None, [ca], encryption)
    )
    return keystore, truststore
