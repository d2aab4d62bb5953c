r"""`shoal acls`: add, list and remove ACLs (like kafka-acls.sh).

    shoal acls --add --allow-principal User:alice --operation Read --topic orders
    shoal acls --add --deny-principal User:bob --operation All \
        --topic pay --resource-pattern-type prefixed
    shoal acls --list [--topic orders] [--principal User:alice]
    shoal acls --remove --allow-principal User:alice --operation Read --topic orders

As kafka-acls.sh, --add makes one binding per principal, host, operation and resource;
--remove and --list select with the same options, any left out matching everything.
Kafka's conveniences (`AclCommand`): `--producer` gives Write, Describe and Create on the
topics (Write and Describe on --transactional-id, IdempotentWrite on the cluster with
--idempotent); `--consumer` gives Read and Describe on the topics and Read on the --group (which
it needs). `--remove` asks for confirmation on a terminal unless `--force`, as Kafka's does; a
script (stdin not a terminal) is not asked.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from typing import Any

from cli.common import OK
from cli.common import UsageError
from cli.common import add_common
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from client.admin import Admin
from protocol.acl import CLUSTER_NAME
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType

_OPS = {op.name.replace("_", "").lower(): op for op in AclOperation if op > AclOperation.ANY}
_PATTERNS = ("literal", "prefixed", "any", "match")


def _operation(text: str) -> AclOperation:
    """Kafka's spelling (`Read`, `DescribeConfigs`) or the enum's (`describe_configs`)."""
    op = _OPS.get(text.replace("_", "").replace("-", "").lower())
    if op is None:
        raise UsageError(f"unknown operation {text!r} (one of: {', '.join(sorted(_OPS))})")
    return op


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic or ()]
    out += [(ResourceType.GROUP, g) for g in args.group or ()]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or ()]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) for every principal and host given."""
    out = []
    for perm, principals, hosts in (
        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
        (AclPermissionType.DENY, args.deny_principal, args.deny_host),
    ):
        for principal, host in itertools.product(principals or (), hosts or ("*",)):
            out.append((principal, host, perm))
    return out


Operations = dict[tuple[ResourceType, str], set[AclOperation]]
_PRODUCER_OPS = {
    ResourceType.TOPIC: {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE},
    ResourceType.TRANSACTIONAL_ID: {AclOperation.WRITE, AclOperation.DESCRIBE},
}
_CONSUMER_OPS = {
    ResourceType.TOPIC: {AclOperation.READ, AclOperation.DESCRIBE},
    ResourceType.GROUP: {AclOperation.READ},
}


def _operations(args: argparse.Namespace) -> Operations:
    """Each resource's operations: --operation's, or those of --producer and/or --consumer."""
    resources = _resources(args)
    if not (args.producer or args.consumer):
        return {r: {_operation(o) for o in args.operation or ()} for r in resources}
    if args.consumer and not args.group:
        raise UsageError("With --consumer you must specify a --group")
    out: Operations = {}
    for rtype, name in resources:
        ops = set()
        if args.producer:
            ops |= _PRODUCER_OPS.get(rtype, set())
        if args.consumer:
            ops |= _CONSUMER_OPS.get(rtype, set())
        if ops:
            out[(rtype, name)] = ops
    if args.producer and args.idempotent:
        out.setdefault((ResourceType.CLUSTER, CLUSTER_NAME), set()).add(
            AclOperation.IDEMPOTENT_WRITE
        )
    return out


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    operations, entries = _operations(args), _entries(args)
    if not operations or not entries or not all(operations.values()):
        raise UsageError("--add needs a resource, an --allow/--deny-principal and an --operation "
                         "(or --producer/--consumer)")  # fmt: skip
    pattern = PatternType[args.resource_pattern_type.upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UsageError("--add takes --resource-pattern-type literal or prefixed")
    return [
        AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(p, h, op, perm))
        for (rtype, name), ops in operations.items()
        for (p, h, perm) in entries
        for op in sorted(ops)
    ]


def _filters(args: argparse.Namespace, *, listing: bool) -> list[AclBindingFilter]:
    pattern = PatternType[args.resource_pattern_type.upper()]
    resources: list[tuple[ResourceType, str | None]] = list(_resources(args))
    if not resources:
        if not listing:
            raise UsageError("--remove needs a resource (--topic, --group, --cluster...)")
        resources = [(ResourceType.ANY, None)]
    entries: list[tuple[str | None, str | None, AclPermissionType]] = list(_entries(args))
    if not entries:
        entries = [(args.principal, None, AclPermissionType.ANY)]
    if args.producer or args.consumer:
        by_resource = _operations(args)
        return [
            AclBindingFilter(rtype, name, pattern, p, h, op, perm)
            for (rtype, name), ops in by_resource.items()
            for (p, h, perm) in entries
            for op in sorted(ops)
        ]
    ops = [_operation(o) for o in args.operation or ()] or [AclOperation.ANY]
    return [
        AclBindingFilter(rtype, name, pattern, p, h, op, perm)
        for (rtype, name), (p, h, perm), op in itertools.product(resources, entries, ops)
    ]


def _print(bindings: list[AclBinding], as_json: bool) -> None:
    rows = [b.fields() for b in sorted(bindings)]
    if as_json:
        print_json(rows)
        return
    headers = [
        "RESOURCE_TYPE",
        "NAME",
        "PATTERN_TYPE",
        "PRINCIPAL",
        "HOST",
        "OPERATION",
        "PERMISSION",
    ]
    print_table(headers, [list(r.values()) for r in rows])


async def _acls(args: argparse.Namespace) -> int:
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("give exactly one of --add, --remove, --list")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        if args.add:
            bindings = _bindings(args)
            await admin.create_acls(bindings)
            if not args.json:
                print(f"Added {len(bindings)} ACL(s).")
        elif args.remove:
            filters = _filters(args, listing=False)
            if not _confirmed(args, filters):
                return OK
            bindings = await admin.delete_acls(filters)
            if not args.json:
                print(f"Removed {len(bindings)} ACL(s).")
        else:
            found: dict[AclBinding, None] = {}
            for f in _filters(args, listing=True):
                found.update(dict.fromkeys(await admin.describe_acls(f)))
            bindings = list(found)
    if args.json or args.list:
        _print(bindings, args.json)
    return OK


def _confirmed(args: argparse.Namespace, filters: list[AclBindingFilter]) -> bool:
    """Kafka's question before removing (`AclCommand.confirmAction`), asked on a terminal only."""
    if args.force or not sys.stdin.isatty():
        return True
    shown = "\n".join(f"\t{f}" for f in filters)
    answer = input(f"Are you sure you want to remove ACLs matching:\n{shown}\n? (y/n)\n")
    return answer.strip().lower() == "y"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("acls", help="add, list and remove ACLs (like kafka-acls.sh)")
    add_common(p)
    action = p.add_argument_group("action (one of)")
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove the ACLs selected")
    action.add_argument("--list", action="store_true", help="list the ACLs selected")
    who = p.add_argument_group("who")
    for flag in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host"):
        who.add_argument(flag, action="append", metavar="VALUE", help="repeatable")
    who.add_argument("--principal", help="--list: only this principal's ACLs")
    what = p.add_argument_group("what")
    what.add_argument(
        "--operation", action="append", help="Read, Write, Describe, All...; repeatable"
    )
    what.add_argument("--topic", action="append", help="repeatable")
    what.add_argument("--group", action="append", help="repeatable")
    what.add_argument("--transactional-id", action="append", help="repeatable")
    what.add_argument("--cluster", action="store_true", help="the cluster resource")
    what.add_argument("--producer", action="store_true",
                      help="producer ACLs: Write, Describe, Create on --topic")  # fmt: skip
    what.add_argument("--consumer", action="store_true",
                      help="consumer ACLs: Read, Describe on --topic, Read on --group")  # fmt: skip
    what.add_argument("--idempotent", action="store_true",
                      help="with --producer: IdempotentWrite on the cluster")  # fmt: skip
    p.add_argument("--force", action="store_true", help="--remove: do not ask for confirmation")
    what.add_argument(
        "--resource-pattern-type",
        choices=_PATTERNS,
        default=None,
        help="literal (default for --add) or prefixed; any or match (default) to select",
    )
    p.set_defaults(func=lambda a: run(_acls, _with_pattern_default(a)))


def _with_pattern_default(args: argparse.Namespace) -> argparse.Namespace:
    """kafka-acls.sh's defaults: literal when adding, any when listing or removing."""
    if args.resource_pattern_type is None:
        args.resource_pattern_type = "literal" if args.add else "any"
    return args
