"""`shoal users`: SCRAM users, offline in a data dir or online through a running broker.

`shoal users add NAME --password PW --data-dir D` writes the credential file of a stopped
broker, as `kafka-storage format --add-scram` does for the first admin: the broker reads the
file when it starts; a running broker's data dir (it holds `.lock`) is refused. With
`--bootstrap-server` (and `--command-config` for a secured listener) the same commands go to a
running broker (AlterUserScramCredentials, DescribeUserScramCredentials), as `kafka-configs
--entity-type users` does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import USAGE
from cli.common import add_common
from cli.common import fail
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from client.admin import Admin
from client.users import DEFAULT_ITERATIONS
from client.users import MECHANISMS
from client.users import delete_user
from client.users import describe_users
from client.users import upsert_user

# The one writer of storage outside the broker (declared in pyproject.toml's contract).
from storage.dir_lock import DataDirLock
from storage.dir_lock import DataDirLocked
from storage.scram_credentials import InvalidCredential
from storage.scram_credentials import Mechanism
from storage.scram_credentials import ScramCredential
from storage.scram_credentials import ScramCredentialStore
from storage.scram_credentials import check_upsert


def _add_offline(args: argparse.Namespace) -> int:
    try:
        mechanism = check_upsert(args.name, args.mechanism, args.iterations)
    except InvalidCredential as e:
        return fail(str(e), USAGE)
    # The broker's own lock, held while the file is read and rewritten: a running broker
    # keeps its users in memory and would never see the change (and its next one would
    # write over it), so its data dir is refused, as `share-state dump` refuses it.
    try:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        lock = DataDirLock(args.data_dir)
    except DataDirLocked:
        return fail(
            f"{args.data_dir} is in use by a running broker: stop it first, or add the user "
            "through it with --bootstrap-server",
            USAGE,
        )
    except OSError as e:
        return fail(f"cannot write {args.data_dir}: {e.strerror or e}", KAFKA_ERROR)
    try:
        return _save_user(args, mechanism)
    finally:
        lock.release()


def _save_user(args: argparse.Namespace, mechanism: Mechanism) -> int:
    store = ScramCredentialStore.in_data_dir(args.data_dir)
    credential = ScramCredential.from_password(mechanism, args.password, args.iterations)
    store.upsert(args.name, mechanism.name, credential)
    try:
        store.save()
    except OSError as e:
        return fail(f"cannot write {args.data_dir}: {e.strerror or e}", KAFKA_ERROR)
    print(f"Added {mechanism.name} credentials for user {args.name} in {args.data_dir}.")
    return OK


async def _add_online(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        await upsert_user(admin.cluster, args.name, args.mechanism, args.password, args.iterations)
    print(f"Added {args.mechanism} credentials for user {args.name}.")
    return OK


def _add(args: argparse.Namespace) -> int:
    if args.data_dir is not None:
        return _add_offline(args)
    return run(_add_online, args)


async def _delete(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        await delete_user(admin.cluster, args.name, args.mechanism)
    print(f"Deleted {args.mechanism} credentials for user {args.name}.")
    return OK


async def _describe(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        users = await describe_users(admin.cluster, args.names or None)
    errors = {n: u for n, u in users.items() if not isinstance(u, dict)}
    found = {n: u for n, u in users.items() if isinstance(u, dict)}
    if args.json:
        print_json(found)
    else:
        rows = [(n, m, i) for n, by_m in found.items() for m, i in sorted(by_m.items())]
        print_table(["USER", "MECHANISM", "ITERATIONS"], rows)
    for name, error in errors.items():
        fail(f"{name}: {error.error_code.name.upper()}: {error.message}", KAFKA_ERROR)
    return KAFKA_ERROR if errors else OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("users", help="SCRAM users (offline in a data dir, or online)")
    cmds = p.add_subparsers(dest="users_command", required=True)
    mechanisms = sorted(MECHANISMS)

    add = cmds.add_parser("add", help="add or replace a user's credentials")
    add.add_argument("name")
    add.add_argument("--password", required=True)
    add.add_argument("--mechanism", choices=mechanisms, default="SCRAM-SHA-512")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    add.add_argument(
        "--data-dir", type=Path, help="write a stopped broker's credential file (offline)"
    )
    add_common(add, json_output=False)
    add.set_defaults(func=_add)

    delete = cmds.add_parser("delete", help="delete a user's credentials for one mechanism")
    delete.add_argument("name")
    delete.add_argument("--mechanism", choices=mechanisms, default="SCRAM-SHA-512")
    add_common(delete, json_output=False)
    delete.set_defaults(func=lambda a: run(_delete, a))

    describe = cmds.add_parser("describe", help="users' mechanisms and iterations")
    describe.add_argument("names", nargs="*", help="users (default: all)")
    add_common(describe)
    describe.set_defaults(func=lambda a: run(_describe, a))
