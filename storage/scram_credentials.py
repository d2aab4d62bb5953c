"""SCRAM credentials, as RFC 5802/7677 store them, in one file in the data dir.

A user's password is never kept: per mechanism the file holds the salt, the iteration count,
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword,
"Server Key"). That is enough to check a SCRAM proof, and (by salting again) a PLAIN password,
so one user database serves both. The file is replaced atomically on every change.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage import json_lines
from storage.errors import StorageException
from storage.fsutil import PRIVATE
from storage.fsutil import FileStamp
from storage.fsutil import atomic_write
from storage.fsutil import file_stamp
from storage.fsutil import read_stamped

CREDENTIALS_FILE = "scram-credentials.json"
DEFAULT_ITERATIONS = 4096  # Kafka's default, and RFC 7677's minimum
MAX_ITERATIONS = 16384  # Kafka refuses more (ScramMechanism.maxIterations)
SALT_BYTES = 32


@dataclass(frozen=True, slots=True)
class Mechanism:
    name: str  # the SASL name
    kafka_type: int  # ScramMechanism's id in DescribeUserScramCredentials / Alter...
    hash_name: str  # hashlib's name

    def digest(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self.hash_name)

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)


SCRAM_SHA_256 = Mechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = Mechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_KAFKA_TYPE: dict[int, Mechanism] = {m.kafka_type: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(
        cls, mechanism: Mechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(
            salt=salt,
            iterations=iterations,
            stored_key=mechanism.digest(client_key),
            server_key=mechanism.hmac(salted_password, b"Server Key"),
        )

    @classmethod
    def from_password(
        cls, mechanism: Mechanism, password: str, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramCredential:
        """Salts and hashes `password` (pbkdf2: milliseconds of CPU; not for the event loop)."""
        salt = secrets.token_bytes(SALT_BYTES)
        salted = mechanism.salted_password(password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def matches_password(self, mechanism: Mechanism, password: str) -> bool:
        """A PLAIN login: salt the password again and compare in constant time (pbkdf2 too)."""
        salted = mechanism.salted_password(password, self.salt, self.iterations)
        candidate = ScramCredential.from_salted_password(
            mechanism, self.salt, salted, self.iterations
        )
        return hmac.compare_digest(candidate.stored_key, self.stored_key)

    def to_json(self) -> dict[str, object]:
        b64 = base64.b64encode
        return {
            "salt": b64(self.salt).decode(),
            "iterations": self.iterations,
            "stored_key": b64(self.stored_key).decode(),
            "server_key": b64(self.server_key).decode(),
        }

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> ScramCredential:
        def b(key: str) -> bytes:
            return base64.b64decode(str(raw[key]))

        iterations = raw["iterations"]
        if not isinstance(iterations, int):
            raise ValueError("iterations is not an integer")
        return cls(b("salt"), iterations, b("stored_key"), b("server_key"))


class InvalidCredential(StorageException, ValueError):
    """A user name, mechanism or iteration count that Kafka would refuse."""


def check_upsert(user: str, mechanism: str, iterations: int) -> Mechanism:
    """:raises InvalidCredential: an empty user, an unknown mechanism, too few/many iterations."""
    if not user:
        raise InvalidCredential("the user name is empty")
    m = MECHANISMS.get(mechanism)
    if m is None:
        raise InvalidCredential(f"unknown SCRAM mechanism {mechanism!r}")
    if not DEFAULT_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InvalidCredential(
            f"iterations must lie within {DEFAULT_ITERATIONS} and {MAX_ITERATIONS}"
        )
    return m


Users = dict[str, dict[str, ScramCredential]]  # user -> mechanism -> credential


# A user per line, so a reader parses a batch of lines at a time: with `--processes N` the
# other processes read the file again in a thread while they serve, and one `json.loads` of a
# million users would hold the interpreter lock (their event loop) for seconds. The document
# is still one JSON value; a file written before (one indented document) is read whole.
_HEADER = b'{"version": 1, "users": {'
_END = b"}}"


def _users(doc: dict[str, Any]) -> Users:
    return {
        name: {m: ScramCredential.from_json(c) for m, c in by_mechanism.items()}
        for name, by_mechanism in doc.items()
    }


def _parse(raw: bytes) -> Users:
    """:raises ValueError, KeyError, TypeError: not a credentials file, or one cut short."""
    f = io.BytesIO(raw)
    if f.readline().rstrip() != _HEADER:  # the format before
        return _users(json.loads(raw).get("users", {}))
    users: Users = {}
    for entries in json_lines.batches(f, b"{}", _END, "users"):
        users.update(_users(entries))
    return users


class ScramCredentialStore:
    """Every user's credentials by mechanism; in memory, written through to one file.

    With `--processes N` node 0 alone writes the file; the others `read_file` again when its
    `stamp` moves (`broker.security_follow`). `reserved` holds credentials that log in but
    are in no file and no answer: the processes' own user (`broker.node_identity`)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._users: Users = {}
        self.reserved: Users = {}
        found = read_stamped(path)
        self.stamp: FileStamp | None = None if found is None else found[0]
        if found is not None:
            self._users = _parse(found[1])

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> ScramCredentialStore:
        return cls(data_dir / CREDENTIALS_FILE)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def login(self, user: str, mechanism: str) -> ScramCredential | None:
        """The credential a SASL login checks: a reserved user's first, whatever the file has."""
        reserved = self.reserved.get(user)
        return reserved.get(mechanism) if reserved is not None else self.get(user, mechanism)

    def file_stamp(self) -> FileStamp | None:
        """Which version of the file is there now (a stat)."""
        return file_stamp(self._path)

    def read_file(self) -> tuple[FileStamp | None, Users]:
        """Every credential the file holds now, and the stamp of what was read (blocking:
        call it off the event loop). :raises ValueError: the file does not parse."""
        found = read_stamped(self._path)
        if found is None:
            return None, {}
        return found[0], _parse(found[1])

    def mechanisms(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """In memory only: `save()` makes it durable."""
        self._users.setdefault(user, {})[mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        by_mechanism = self._users.get(user, {})
        if by_mechanism.pop(mechanism, None) is None:
            return False
        if not by_mechanism:
            del self._users[user]
        return True

    def export(self) -> dict[str, dict[str, ScramCredential]]:
        """A copy of every credential, to `restore` if a change cannot be written."""
        return {name: dict(by_m) for name, by_m in self._users.items()}

    def restore(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        self._users = users

    def copy(self) -> ScramCredentialStore:
        """A copy to plan changes on: nothing is read or written."""
        other = object.__new__(ScramCredentialStore)
        other._path = self._path
        other._users = self.export()
        other.reserved = {}
        other.stamp = self.stamp
        return other

    def snapshot(self) -> bytes:
        """The file's next content (taken on the loop, written by `write` anywhere)."""
        lines = [
            b"%s: %s" % (json.dumps(name).encode(),
                         json.dumps({m: c.to_json() for m, c in sorted(by_m.items())}).encode())
            for name, by_m in sorted(self._users.items())
        ]  # fmt: skip
        return json_lines.encode(_HEADER, lines, _END)

    def write(self, data: bytes) -> None:
        """Atomically replace the file (fsyncs: run it off the event loop)."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self._path, data, PRIVATE)  # 0600 from its first byte, the tmp file too

    def save(self) -> None:
        self.write(self.snapshot())
