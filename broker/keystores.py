"""PKCS12 keystores and truststores, as Kafka accepts them (`ssl.keystore.type=PKCS12`,
`ssl.truststore.type=PKCS12`), loaded into Python's `ssl`, which reads only PEM.

The `cryptography` package opens the PKCS12 file (with `ssl.keystore.password`, Kafka's store
password; `ssl.truststore.password` for a truststore, which may have none). The truststore's
certificates go to `ssl` as PEM text in memory. `SSLContext.load_cert_chain` takes only a file,
so the private key is written to one, in a directory only this process's user can read,
encrypted under a fresh random password, and deleted as soon as it is loaded: the key is never
on disk in the clear, even for a moment.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.serialization import BestAvailableEncryption
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.hazmat.primitives.serialization import PrivateFormat
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.errors import BrokerException


class KeystoreError(BrokerException, ssl.SSLError):
    """A PKCS12 store that does not open: the broker does not start, as with a bad PEM file."""


def _open(path: str, password: str) -> pkcs12.PKCS12KeyAndCertificates:
    """:raises KeystoreError: not PKCS12, or a wrong password; OSError: unreadable."""
    data = Path(path).read_bytes()
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as e:
        raise KeystoreError(f"{path}: not a PKCS12 store, or a wrong password ({e})") from None


def load_keystore(context: ssl.SSLContext, path: str, password: str) -> None:
    """The PKCS12 keystore's private key and certificate chain into `context`.

    :raises KeystoreError: not PKCS12, a wrong password, or no key and certificate in it.
    """
    store = _open(path, password)
    if store.key is None or store.cert is None:
        raise KeystoreError(f"{path}: the PKCS12 keystore holds no private key and certificate")
    once = secrets.token_urlsafe(32).encode()
    key = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(once))
    chain = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
    with tempfile.TemporaryDirectory(prefix="shoal-keystore-") as directory:
        pem = Path(directory) / "keystore.pem"
        fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key + b"".join(c.public_bytes(Encoding.PEM) for c in chain))
        context.load_cert_chain(pem, password=once)


def truststore_pem(path: str, password: str) -> str:
    """The PKCS12 truststore's certificates as PEM text (for `load_verify_locations`).

    :raises KeystoreError: not PKCS12, a wrong password, or no certificate in it.
    """
    store = _open(path, password)
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.insert(0, store.cert.certificate)
    if not certs:
        raise KeystoreError(f"{path}: the PKCS12 truststore holds no certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)
