"""`shoal consumer-groups`: consumer groups' committed offsets, like kafka-consumer-groups.sh.

One action per run: `--list`, `--describe --group G` (per partition: committed offset, log
end, lag in data records (`client.fetch.data_records`: transaction markers and share-state
records after the commit are not lag, as the broker's lag metric counts) and the member that
owns it; or `--members` with `--verbose` for their assignment,
or `--state`: coordinator, assignor, state, member count), `--reset-offsets` (a dry run unless
`--execute`, as in Kafka's tool), `--delete --group G` and `--delete-offsets --group G
--topic T`. Classic and KIP-848 groups alike; a group whose members are gone (or whose
coordinator restarted) is described by its committed offsets, as Empty.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from cli import consumer_group_reset
from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import fail
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from cli.offset_specs import topic_partitions
from client.admin import Admin
from client.admin import GroupListing
from client.fetch import LAG_READ_BYTES
from client.fetch import data_records
from client.group_describe import ConsumerGroupDescription

TopicPartition = tuple[str, int]
# States in which a group's assignment is moving (classic, then KIP-848 names).
REBALANCING = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


# kafka-consumer-groups.sh lists the groups of consumers: both types, consumer protocol only
# (`ListGroupsOptions.forConsumerGroups` in Kafka's admin client).
TYPES = ("classic", "consumer")
STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling",
          "Empty", "Dead")  # fmt: skip


def _filter(text: str | None, valid: tuple[str, ...], what: str) -> list[str]:
    """`--state Stable,Empty` or `--type classic` (any case); empty: no filter."""
    if not text:
        return []
    by_lower = {v.lower(): v for v in valid}
    wanted = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in wanted if w.lower() not in by_lower]
    if unknown:
        raise UsageError(f"Invalid {what} list '{text}'. Valid {what}s are: {', '.join(valid)}")
    return [by_lower[w.lower()] for w in wanted]


async def consumer_groups(
    admin: Admin, states: list[str] | None = None, types: list[str] | None = None
) -> list[GroupListing]:
    listed = await admin.list_groups(types=types or TYPES, states=states)
    return [g for g in listed if g.protocol_type in ("", "consumer")]


async def _list(args: argparse.Namespace) -> int:
    states = _filter(args.state, STATES, "state")
    types = _filter(args.type, TYPES, "type")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        groups = await consumer_groups(admin, states, types)
    if args.json:
        print_json([{"group": g.group_id, "type": g.group_type, "state": g.state}
                    for g in groups])  # fmt: skip
        return OK
    if args.state is None and args.type is None:
        for g in groups:
            print(g.group_id)
        return OK
    # Kafka's columns: GROUP, then TYPE with --type, then STATE with --state.
    headers = ["GROUP"] + ["TYPE"] * (args.type is not None) + ["STATE"] * (args.state is not None)
    rows = [
        [g.group_id]
        + [g.group_type] * (args.type is not None)
        + [g.state] * (args.state is not None)
        for g in groups
    ]
    print_table(headers, rows)
    return OK


async def _describe(args: argparse.Namespace) -> int:
    if args.members + (args.state is not None) + args.offsets > 1:
        raise UsageError("--members, --state and --offsets exclude each other")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        groups = await _groups(admin, args)
        if not args.all_groups:
            return await _describe_one(admin, args, groups[0])
        args.collected = []  # --json: one list of every group's document
        for group in groups:
            await _describe_one(admin, args, group)
    if args.json:
        print_json(args.collected)
    return OK


def _emit(args: argparse.Namespace, doc: Any) -> None:
    """A group's JSON document: printed, or kept for --all-groups' one list."""
    if getattr(args, "collected", None) is not None:
        args.collected.append(doc)
    else:
        print_json(doc)


async def _describe_one(admin: Admin, args: argparse.Namespace, group: str) -> int:
    desc = await admin.describe_consumer_group(group)
    committed = await admin.list_consumer_group_offsets(group)
    if desc is None and not committed:
        raise NotFound(f"GROUP_ID_NOT_FOUND: consumer group {group!r} does not exist")
    if args.members or args.state is not None:
        (_members if args.members else _state)(args, group, desc)
        return OK
    owners = {
        (t, p): m
        for m in (desc.members if desc else [])
        for t, ps in m.assignment.items()
        for p in ps
    }
    ends = {
        tp: await admin.list_offsets(tp[0], tp[1], "latest")
        for tp in sorted(set(committed) | set(owners))
    }
    # Lag in data records, as the broker's kafka_consumergroup_lag_sum counts it.
    lags = {
        tp: await data_records(admin.cluster, tp[0], tp[1], committed[tp].offset, end)
        for tp, end in ends.items()
        if tp in committed and committed[tp].offset >= 0
    }
    rows = []
    for tp, end in ends.items():
        current = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        owner = owners.get(tp)
        lag = lags[tp][0] if tp in lags else None
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end, "lag": lag,
                     "consumer_id": owner and owner.member_id, "host": owner and owner.client_host,
                     "client_id": owner and owner.client_id})  # fmt: skip
    if args.json:
        _emit(args, {"group": group, "state": _state_name(desc), "partitions": rows})
        return OK
    _warn(group, desc)
    for tp in sorted(tp for tp, (_, whole) in lags.items() if not whole):
        print(f"{tp[0]}-{tp[1]}: lag counts every offset past the first "
              f"{LAG_READ_BYTES >> 20} MiB read as a record.\n")  # fmt: skip
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
         "CONSUMER-ID", "HOST", "CLIENT-ID"],
        [[group, *r.values()] for r in rows],
    )  # fmt: skip
    return OK


def _state_name(desc: ConsumerGroupDescription | None) -> str:
    return desc.state if desc is not None else "Empty"  # only committed offsets are left


def _warn(group: str, desc: ConsumerGroupDescription | None) -> None:
    """Kafka's line above the table: an empty or rebalancing group."""
    if desc is None or not desc.members:
        print(f"Consumer group '{group}' has no active members.\n")
    elif desc.state in REBALANCING:
        print(f"Warning: Consumer group '{group}' is rebalancing.\n")


def _assignment_text(assignment: dict[str, tuple[int, ...]] | None) -> str:
    """Kafka's form: `topic(0,1),other(2)`; "-" for none."""
    if not assignment:
        return "-"
    return ",".join(
        f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(assignment.items())
    )


def _members(args: argparse.Namespace, group: str, desc: ConsumerGroupDescription | None) -> None:
    members = sorted(desc.members, key=lambda m: m.member_id) if desc else []
    if args.json:
        _emit(
            args,
            {"group": group, "state": _state_name(desc), "members": [asdict(m) for m in members]},
        )
        return
    _warn(group, desc)
    if not members:
        return
    kip848 = desc is not None and desc.group_type == "consumer"
    headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if args.verbose:
        headers[2:2] = ["GROUP-INSTANCE-ID"]
        headers += (["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-ASSIGNMENT"] if kip848
                    else ["ASSIGNMENT"])  # fmt: skip
    rows = []
    for m in members:
        row: list[Any] = [group, m.member_id, m.client_host, m.client_id,
                          sum(map(len, m.assignment.values()))]  # fmt: skip
        if args.verbose:
            row[2:2] = [m.instance_id]
            row += [_assignment_text(m.assignment)]
            if kip848:
                row[-1:-1] = [m.member_epoch]
                row.append(_assignment_text(m.target_assignment))
        rows.append(row)
    print_table(headers, rows)


def _state(args: argparse.Namespace, group: str, desc: ConsumerGroupDescription | None) -> None:
    c = desc.coordinator if desc else None
    info = {
        "group": group,
        "coordinator": None if c is None else {"id": c.node_id, "host": c.host, "port": c.port},
        "assignment_strategy": desc.assignor if desc else "",
        "state": _state_name(desc),
        "members": len(desc.members) if desc else 0,
        "type": desc.group_type if desc else None,
        "group_epoch": desc.group_epoch if desc else None,
        "assignment_epoch": desc.assignment_epoch if desc else None,
    }
    if args.json:
        _emit(args, info)
        return
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [group, None if c is None else f"{c.host}:{c.port} ({c.node_id})",
           info["assignment_strategy"] or None, info["state"], info["members"]]  # fmt: skip
    if args.verbose:
        headers += ["TYPE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [info["type"], info["group_epoch"], info["assignment_epoch"]]
    print_table(headers, [row])


def _one_group(args: argparse.Namespace) -> str:
    if not args.group or len(args.group) != 1:
        raise UsageError(f"--{args.action} needs exactly one --group")
    return str(args.group[0])


async def _groups(admin: Admin, args: argparse.Namespace) -> list[str]:
    """`--all-groups` (every consumer group), or the one `--group`."""
    if args.all_groups:
        if args.group:
            raise UsageError("--group and --all-groups exclude each other")
        return [g.group_id for g in await consumer_groups(admin)]
    return [_one_group(args)]


async def _reset(args: argparse.Namespace) -> int:
    consumer_group_reset.check_options(args)
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        return await consumer_group_reset.reset(args, admin, await _groups(admin, args))


async def _delete_offsets(args: argparse.Namespace) -> int:
    group = _one_group(args)
    if not args.topic:
        raise UsageError("--delete-offsets needs --topic")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        committed = await admin.list_consumer_group_offsets(group)
        wanted = []
        for spec in args.topic:
            name, sep, _ = spec.partition(":")
            known = sorted(p for t, p in committed if t == name)
            wanted += [(name, p) for p in (topic_partitions(spec, 0) if sep else known)]
        results = await admin.delete_consumer_group_offsets(group, wanted)
    rows = [[t, p, "Successful" if e is None else e.error_code.name.upper()]
            for (t, p), e in sorted(results.items())]  # fmt: skip
    if args.json:
        print_json([{"topic": t, "partition": p, "status": s} for t, p, s in rows])
    else:
        print_table(["TOPIC", "PARTITION", "STATUS"], rows)
    return KAFKA_ERROR if any(e is not None for e in results.values()) else OK


async def _delete(args: argparse.Namespace) -> int:
    if not args.group and not args.all_groups:
        raise UsageError("--delete needs --group or --all-groups")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        groups = await _groups(admin, args) if args.all_groups else args.group
        results = await admin.delete_groups(groups) if groups else {}
    if args.json:
        print_json(
            {g: "ok" if e is None else e.error_code.name.upper() for g, e in results.items()}
        )
    else:
        deleted = [g for g, e in results.items() if e is None]
        if deleted:
            names = ", ".join(f"'{g}'" for g in deleted)
            print(f"Deletion of requested consumer groups ({names}) was successful.")
    failed = {g: e for g, e in results.items() if e is not None}
    for g, e in failed.items():
        fail(f"{e.error_code.name.upper()}: cannot delete consumer group {g}", KAFKA_ERROR, args)
    return KAFKA_ERROR if failed else OK


_ACTIONS = {
    "list": _list, "describe": _describe, "reset-offsets": _reset,
    "delete": _delete, "delete-offsets": _delete_offsets,
}  # fmt: skip


def _dispatch(args: argparse.Namespace) -> int:
    return run(_ACTIONS[args.action], args)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "consumer-groups", help="list, describe, reset and delete consumer groups' offsets"
    )
    add_common(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name, what in (
        ("list", "list consumer groups"),
        ("describe", "a group's offsets and lag, or --members, or --state"),
        ("reset-offsets", "set a group's offsets (dry run unless --execute)"),
        ("delete", "delete groups (their committed offsets)"),
        ("delete-offsets", "delete a group's offsets of some topics"),
    ):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name,
                            help=what)  # fmt: skip
    p.add_argument("--group", action="append", help="the group (repeatable with --delete)")
    p.add_argument("--all-groups", action="store_true",
                   help="every consumer group (--describe, --reset-offsets, --delete)")  # fmt: skip
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P]", help="repeatable")
    p.add_argument("--all-topics", action="store_true", help="every topic the group committed")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS.sss")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS", help="this long before now")
    to.add_argument("--to-offset", type=int, metavar="OFFSET")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset + N")
    p.add_argument("--members", action="store_true", help="--describe: the group's members")
    p.add_argument("--state", nargs="?", const="", metavar="STATE[,STATE]",
                   help="--describe: coordinator, state, members; --list: show states "
                   "(only these, if given)")  # fmt: skip
    p.add_argument(
        "--type",
        nargs="?",
        const="",
        metavar="TYPE[,TYPE]",
        help="--list: show types, classic or consumer (only these, if given)",
    )
    p.add_argument("--offsets", action="store_true", help="--describe: per partition (default)")
    p.add_argument("--verbose", action="store_true", help="--describe: assignments and epochs")
    p.add_argument("--dry-run", action="store_true", help="only show the new offsets (default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(func=_dispatch)
