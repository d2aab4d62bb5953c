"""SCRAM users of a running broker: DescribeUserScramCredentials and
AlterUserScramCredentials, as Kafka's `kafka-configs --alter --add-config SCRAM-SHA-512=...`.

The password never goes over the wire: it is salted here (pbkdf2 with a fresh salt) and the
broker derives and keeps only the stored key and server key.
"""

from __future__ import annotations

import hashlib
import secrets

from kio.schema.alter_user_scram_credentials import v0 as alter
from kio.schema.describe_user_scram_credentials import v0 as describe
from kio.static.primitive import i8
from kio.static.primitive import i32

from client.cluster import Cluster
from client.errors import KafkaError
from client.errors import error_for

# Kafka's ScramMechanism ids and their hashes.
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
NAMES = {kafka_type: name for name, (kafka_type, _) in MECHANISMS.items()}
DEFAULT_ITERATIONS = 4096


async def describe_users(
    cluster: Cluster, names: list[str] | None = None
) -> dict[str, dict[str, int] | KafkaError]:
    """User -> {mechanism: iterations}, or the error for that user; all users when no names."""
    users = None if not names else tuple(describe.request.UserName(name=n) for n in names)
    await cluster.bootstrap()
    resp = await cluster.request(describe.DescribeUserScramCredentialsRequest(users=users))
    if resp.error_code:
        raise error_for(resp.error_code, resp.error_message)
    out: dict[str, dict[str, int] | KafkaError] = {}
    for r in resp.results:
        out[r.user] = (
            error_for(r.error_code, r.error_message)
            if r.error_code
            else {
                NAMES.get(int(c.mechanism), str(c.mechanism)): int(c.iterations)
                for c in r.credential_infos
            }
        )
    return out


async def upsert_user(
    cluster: Cluster, name: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS
) -> None:
    """:raises KafkaError: the broker refused (UNACCEPTABLE_CREDENTIAL...)."""
    kafka_type, hash_name = MECHANISMS[mechanism]
    salt = secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    upsertion = alter.request.ScramCredentialUpsertion(
        name=name,
        mechanism=i8(kafka_type),
        iterations=i32(iterations),
        salt=salt,
        salted_password=salted,
    )
    await _alter(
        cluster, alter.AlterUserScramCredentialsRequest(deletions=(), upsertions=(upsertion,))
    )


async def delete_user(cluster: Cluster, name: str, mechanism: str) -> None:
    """:raises KafkaError: RESOURCE_NOT_FOUND when the user has no such credential."""
    deletion = alter.request.ScramCredentialDeletion(
        name=name, mechanism=i8(MECHANISMS[mechanism][0])
    )
    await _alter(
        cluster, alter.AlterUserScramCredentialsRequest(deletions=(deletion,), upsertions=())
    )


async def _alter(cluster: Cluster, request: alter.AlterUserScramCredentialsRequest) -> None:
    await cluster.bootstrap()
    resp = await cluster.request(request)
    for r in resp.results:
        if r.error_code:
            raise error_for(r.error_code, r.error_message)
