"""`shoal configs --entity-type users`: SCRAM credentials as kafka-configs.sh manages them.

    shoal configs --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    shoal configs --describe --entity-type users [--entity-name alice]
    shoal configs --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-256

Kafka's forms and output (`ConfigCommand` in apache/kafka tools/): `MECHANISM=[password=P]`
with optional `iterations=N` (default 4096); describe prints `SCRAM credential configs for
user-principal 'U' are SCRAM-SHA-256=iterations=8192, ...` per user; alter prints `Completed
updating config for user U.`. User quotas (`producer_byte_rate`...) are not served: refused
(exit 2) rather than silently ignored.
"""

from __future__ import annotations

import argparse

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import UsageError
from cli.common import fail
from cli.common import parse_key_values
from cli.common import print_json
from cli.common import split_commas
from client.admin import Admin
from client.users import DEFAULT_ITERATIONS
from client.users import MECHANISMS
from client.users import delete_user
from client.users import describe_users
from client.users import upsert_user


def _scram(name: str, value: str | None) -> tuple[str, int]:
    """(password, iterations) from `password=P,iterations=N` (brackets already removed)."""
    if name not in MECHANISMS:
        raise UsageError(f"--entity-type users takes only SCRAM credentials "
                         f"({', '.join(MECHANISMS)}), not {name!r}")  # fmt: skip
    fields = parse_key_values(value or "")
    if "password" not in fields:
        raise UsageError(f"{name} needs [password=...] (and optionally iterations=N)")
    try:
        return fields["password"], int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UsageError(f"{name}: iterations must be a number") from None


async def alter(args: argparse.Namespace, admin: Admin, name: str) -> int:
    upserts = {}
    for text in args.add_config or ():
        for item in split_commas(text):
            mechanism, _, value = item.partition("=")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            upserts[mechanism.strip()] = _scram(mechanism.strip(), value)
    deletes = [m for text in args.delete_config or () for m in split_commas(text)]
    for mechanism in deletes:
        if mechanism not in MECHANISMS:
            raise UsageError(f"--delete-config {mechanism!r}: one of {', '.join(MECHANISMS)}")
    if not upserts and not deletes:
        raise UsageError("nothing to alter: give --add-config and/or --delete-config")
    for mechanism, (password, iterations) in upserts.items():
        await upsert_user(admin.cluster, name, mechanism, password, iterations)
    for mechanism in deletes:
        await delete_user(admin.cluster, name, mechanism)
    if args.json:
        print_json({"entity_type": "users", "entity_name": name,
                    "upserted": sorted(upserts), "deleted": deletes})  # fmt: skip
    else:
        print(f"Completed updating config for user {name}.")
    return OK


async def describe(args: argparse.Namespace, admin: Admin, name: str | None) -> int:
    users = await describe_users(admin.cluster, [name] if name else None)
    found = {u: m for u, m in users.items() if isinstance(m, dict)}
    if args.json:
        print_json(found)
    else:
        for user, mechanisms in sorted(found.items()):
            text = ", ".join(f"{m}=iterations={i}" for m, i in sorted(mechanisms.items()))
            print(f"SCRAM credential configs for user-principal '{user}' are {text}")
    errors = {u: e for u, e in users.items() if not isinstance(e, dict)}
    for user, error in errors.items():
        fail(f"Error retrieving SCRAM credential configs for user-principal '{user}': "
             f"{error.error_code.name.upper()}: {error.message}", KAFKA_ERROR, args)  # fmt: skip
    return KAFKA_ERROR if errors else OK
