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
