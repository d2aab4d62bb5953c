"""`shoal configs`: describe and alter configs of groups, topics and the broker
(like kafka-configs.sh: --entity-type, --entity-name, --add-config, --delete-config).

`describe` shows the configs set on the entity (dynamic, group or topic overrides) and, with
`--all`, every config with its source. `--entity-type users` manages SCRAM credentials as
kafka-configs.sh does (`cli/user_configs.py`). Broker configs that may change at runtime are the
`group.share.*` defaults and bounds and the `log.*` defaults of topic configs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli import user_configs
from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import parse_key_values
from cli.common import parse_properties
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from cli.common import split_commas
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource

ENTITY_TYPES = {
    "topics": ConfigResourceType.TOPIC,
    "brokers": ConfigResourceType.BROKER,
    "groups": ConfigResourceType.GROUP,
}
# What is set on an entity itself: a topic following a dynamic broker default has set nothing.
OVERRIDES = {
    ConfigResourceType.TOPIC: {ConfigSource.DYNAMIC_TOPIC_CONFIG},
    ConfigResourceType.BROKER: {
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    },
    ConfigResourceType.GROUP: {ConfigSource.GROUP_CONFIG},
}


# kafka-configs.sh's shorthands for --entity-type X --entity-name N.
SHORTHANDS = {"topic": "topics", "group": "groups", "broker": "brokers"}


def _entity(args: argparse.Namespace) -> tuple[ConfigResourceType, str]:
    given = [(t, getattr(args, s)) for s, t in SHORTHANDS.items() if getattr(args, s) is not None]
    if args.broker_defaults:
        given.append(("brokers", None))
        args.entity_default = True
    if given:
        if len(given) > 1 or args.entity_type is not None or args.entity_name is not None:
            raise UsageError("give one of --topic/--group/--broker/--broker-defaults, "
                             "or --entity-type with --entity-name")  # fmt: skip
        args.entity_type, args.entity_name = given[0]
    if args.entity_type is None:
        raise UsageError("give --entity-type (or one of --topic/--group/--broker)")
    kind = ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        if kind != ConfigResourceType.BROKER:
            raise UsageError("--entity-default applies to --entity-type brokers only")
        return kind, ""
    if args.entity_name is None:
        if kind == ConfigResourceType.BROKER:
            return kind, ""
        raise UsageError(f"--entity-name is required for --entity-type {args.entity_type}")
    return kind, args.entity_name


def _users(args: argparse.Namespace) -> str | None:
    """The user named for `--entity-type users` (or `--user`); None for every user."""
    if args.user is not None:
        if args.entity_type not in (None, "users") or args.entity_name is not None:
            raise UsageError("give --user, or --entity-type users with --entity-name")
        return str(args.user)
    return None if args.entity_name is None else str(args.entity_name)


def _is_users(args: argparse.Namespace) -> bool:
    return args.entity_type == "users" or args.user is not None


async def _describe(args: argparse.Namespace) -> int:
    if _is_users(args):
        async with Admin(args.bootstrap_server, security=security(args)) as admin:
            return await user_configs.describe(args, admin, _users(args))
    kind, name = _entity(args)
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        entries = await admin.describe_config_entries(kind, name)
        shown = [e for e in entries if args.all or e.source in OVERRIDES[kind]]
        # A group's configs may be set before it exists; with neither, the name is a typo.
        if kind == ConfigResourceType.GROUP and not shown and not await _group_exists(admin, name):
            raise NotFound(f"GROUP_ID_NOT_FOUND: no group {name!r} and no configs set for it")
    if args.json:
        print_json(
            [
                {
                    "name": e.name,
                    "value": e.value,
                    "source": e.source.name,
                    "read_only": e.read_only,
                }
                for e in shown
            ]
        )
        return OK
    print_table(
        ["NAME", "VALUE", "SOURCE", "READ-ONLY"],
        [[e.name, e.value, e.source.name, str(e.read_only).lower()] for e in shown],
    )
    return OK


async def _group_exists(admin: Admin, name: str) -> bool:
    return name in {g.group_id for g in await admin.list_groups()}


async def _alter(args: argparse.Namespace) -> int:
    if _is_users(args):
        user = _users(args)
        if user is None:
            raise UsageError("--entity-name is required for --entity-type users")
        async with Admin(args.bootstrap_server, security=security(args)) as admin:
            return await user_configs.alter(args, admin, user)
    kind, name = _entity(args)
    changes: dict[str, str | None] = {}
    for text in args.add_config or ():
        changes.update(parse_key_values(text))
    if args.add_config_file is not None:
        try:
            changes.update(parse_properties(args.add_config_file.read_text()))
        except OSError as e:
            raise UsageError(f"--add-config-file {args.add_config_file}: {e.strerror}") from None
    for text in args.delete_config or ():
        changes.update(dict.fromkeys(split_commas(text)))
    if not changes:
        raise UsageError("nothing to alter: give --add-config(-file) and/or --delete-config")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        await admin.incremental_alter_configs(kind, name, changes)
    label = f"{args.entity_type[:-1]} {name!r}" if name else "the default broker"
    if args.json:
        print_json({"entity_type": args.entity_type, "entity_name": name, "changes": changes})
    else:
        print(f"Completed updating config for {label}.")
    return OK


def _entity_options(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument("--entity-type", choices=sorted([*ENTITY_TYPES, "users"]))
    p.add_argument("--entity-name", help="topic, group, broker id or user")
    p.add_argument("--user", metavar="NAME", help="--entity-type users --entity-name")
    p.add_argument("--entity-default", action="store_true", help="the cluster-wide broker default")
    for shorthand, kind in SHORTHANDS.items():
        p.add_argument(f"--{shorthand}", metavar="NAME", help=f"--entity-type {kind} --entity-name")
    p.add_argument("--broker-defaults", action="store_true", help="--entity-type brokers "
                   "--entity-default")  # fmt: skip


def add_parser(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe and alter group, topic and broker configs")
    actions = p.add_subparsers(dest="action", required=True)

    describe = actions.add_parser("describe", help="configs of one entity")
    _entity_options(describe)
    describe.add_argument("--all", action="store_true", help="every config, not only overrides")
    describe.set_defaults(func=lambda a: run(_describe, a))

    alter = actions.add_parser("alter", help="set or delete configs of one entity")
    _entity_options(alter)
    alter.add_argument("--add-config", action="append", metavar="K=V[,K=V]")
    alter.add_argument("--add-config-file", type=Path, metavar="FILE", help="K=V lines to set")
    alter.add_argument("--delete-config", action="append", metavar="K[,K]")
    alter.set_defaults(func=lambda a: run(_alter, a))
