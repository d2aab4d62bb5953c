"""`shoal share-groups`: list, describe, reset-offsets, delete-offsets, delete
(like kafka-share-groups.sh).

`reset-offsets` is a dry run unless `--execute` is given, as in Kafka's tool; it needs the
group to be empty (the broker answers NON_EMPTY_GROUP otherwise).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from dataclasses import dataclass
from typing import Any

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import UsageError
from cli.common import add_common
from cli.common import fail
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from cli.offset_specs import named_partitions
from cli.offset_specs import parse_datetime_ms
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ShareGroupDescription
from client.admin import SharePartitionOffsets
from client.errors import KafkaError
from protocol.dead_letter import dead_letter_problem

TopicPartition = tuple[str, int]
EXECUTED = "\nExecuted: the group's start offsets are now the ones above."
DRY_RUN = "\nDry run: nothing changed. Add --execute to apply these start offsets."
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_PREFIX = "errors.deadletterqueue.topic.name.prefix"
DLQ_ENABLE = "errors.deadletterqueue.group.enable"


@dataclass(frozen=True, slots=True)
class _Described:
    desc: ShareGroupDescription
    offsets: dict[TopicPartition, SharePartitionOffsets]
    dlq: str | None  # the group's dead-letter topic (KIP-1191), if it names one
    dlq_problem: str | None  # why its records cannot go there


async def _list(args: argparse.Namespace) -> int:
    # `--state` alone shows the state column (as kafka-share-groups.sh); with values, filters.
    states = [s for v in args.state or () for s in v.split(",") if s]
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        groups = await admin.list_groups(types=["share"], states=states or None)
    if args.json:
        print_json([{"group": g.group_id, "state": g.state} for g in groups])
    elif args.state is not None:
        print_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in groups])
    else:
        for g in groups:
            print(g.group_id)
    return OK


def _offset_rows(group: str, offsets: dict[TopicPartition, SharePartitionOffsets]) -> list[Any]:
    return [
        [group, tp[0], tp[1], o.start_offset, o.end_offset, o.lag,
         o.available, o.delayed, o.acquired, o.acknowledged, o.archived, o.archiving, o.control]
        for tp, o in sorted(offsets.items())
    ]  # fmt: skip


async def _dead_letter(admin: Admin, group: str) -> tuple[str | None, str | None]:
    """The group's dead-letter topic (KIP-1191) and why its records cannot go there, checked
    by the broker's rules: (None, None) when the group has none."""
    try:
        configs = await admin.describe_configs(ConfigResourceType.GROUP, group, (DLQ_TOPIC,))
    except KafkaError:  # not allowed to describe the group's configs: nothing to say
        return None, None
    name = configs.get(DLQ_TOPIC) or None
    if name is None:
        return None, None
    try:
        broker = await admin.describe_configs(ConfigResourceType.BROKER, "", (DLQ_PREFIX,))
        prefix = broker.get(DLQ_PREFIX) or ""
    except KafkaError:  # not allowed to describe the cluster: the prefix goes unchecked
        prefix = ""
    exists = name in await admin.list_topics()
    enabled = exists and (
        (await admin.describe_configs(ConfigResourceType.TOPIC, name, (DLQ_ENABLE,))).get(
            DLQ_ENABLE
        )
        == "true"
    )
    return name, dead_letter_problem(group, name, prefix, exists, enabled)


async def _describe(args: argparse.Namespace) -> int:
    """Each group named (or every share group); a missing one is reported, the rest shown."""
    if args.all_groups == bool(args.group):
        raise UsageError("give --group (repeatable) or --all-groups")
    found: list[_Described] = []
    missing: list[KafkaError] = []
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        if args.all_groups:
            names = [g.group_id for g in await admin.list_groups(types=["share"])]
        else:
            names = list(dict.fromkeys(args.group))
        for group in names:
            try:
                found.append(await _describe_one(admin, group))
            except KafkaError as error:
                missing.append(error)
    if args.json:
        shown = [_describe_json(d) for d in found]
        # One --group keeps the object scripts already read; several (or all) give a list.
        single = not args.all_groups and len(names) == 1
        if shown or not single:
            print_json(shown[0] if single else shown)
    else:
        for i, described in enumerate(found):
            if i:
                print()
            _describe_table(args, described)
    for m in missing:
        fail(f"{m.error_code.name.upper()}: {m.message}", KAFKA_ERROR, args)
    return KAFKA_ERROR if missing else OK


async def _describe_one(admin: Admin, group: str) -> _Described:
    desc = (await admin.describe_share_groups([group]))[group]
    offsets = await admin.describe_share_group_offsets(group)
    dlq, dlq_problem = await _dead_letter(admin, group)
    if dlq is not None and dlq_problem is None and any(t == dlq for t, _ in offsets):
        dlq_problem = f"dead-letter topic {dlq} of group {group} is the topic it reads"
    return _Described(desc, offsets, dlq, dlq_problem)


def _describe_json(d: _Described) -> dict[str, Any]:
    return {
        "group": d.desc.group_id,
        "state": d.desc.state,
        "group_epoch": d.desc.group_epoch,
        "assignment_epoch": d.desc.assignment_epoch,
        "assignor": d.desc.assignor,
        "members": [asdict(m) for m in d.desc.members],
        "partitions": [asdict(o) for _, o in sorted(d.offsets.items())],
        "dead_letter_topic": d.dlq,
        "dead_letter_problem": d.dlq_problem,
    }


def _describe_table(args: argparse.Namespace, d: _Described) -> None:
    desc, offsets, dlq, dlq_problem = d.desc, d.offsets, d.dlq, d.dlq_problem
    group = desc.group_id
    show_all = not (args.members or args.offsets or args.state)
    if args.state or show_all:
        print_table(
            ["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
            [[group, desc.state, desc.group_epoch, desc.assignment_epoch, len(desc.members)]],
        )
        if dlq is not None:  # records given up on are archived without a copy while not ok
            print_table(
                ["GROUP", "DEAD-LETTER-TOPIC", "STATUS"], [[group, dlq, dlq_problem or "ok"]]
            )
    if args.members or show_all:
        _blank_between(show_all)
        rows = [
            [group, m.member_id, m.client_id, m.client_host, m.member_epoch,
             ",".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(m.assignment.items()))]
            + ([m.rack_id or "-", ",".join(m.subscribed)] if args.verbose else [])
            for m in desc.members
        ]  # fmt: skip
        headers = ["GROUP", "MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "ASSIGNMENT"]
        print_table(headers + (["RACK", "SUBSCRIBED"] if args.verbose else []), rows)
    if args.offsets or show_all:
        _blank_between(show_all)
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "END-OFFSET", "LAG",
             "AVAILABLE", "DELAYED", "ACQUIRED", "ACKNOWLEDGED", "ARCHIVED", "ARCHIVING",
             "CONTROL"],
            _offset_rows(group, offsets),
        )  # fmt: skip


def _blank_between(show_all: bool) -> None:
    if show_all:
        print()


async def _targets(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    if args.all_topics:
        started = await admin.describe_share_group_offsets(args.group)
        if not started:
            raise UsageError(f"group {args.group} has no offsets yet: name them with --topic")
        return sorted(started)
    return await named_partitions(admin, args.topic)


async def _new_offset(admin: Admin, args: argparse.Namespace, tp: TopicPartition) -> int:
    earliest = await admin.list_offsets(tp[0], tp[1], "earliest")
    latest = await admin.list_offsets(tp[0], tp[1], "latest")
    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if args.to_datetime is not None:
        found = await admin.list_offsets(tp[0], tp[1], parse_datetime_ms(args.to_datetime))
        return latest if found < 0 else found
    return min(max(int(args.to_offset), earliest), latest)


async def _reset(args: argparse.Namespace) -> int:
    if args.dry_run and args.execute:
        raise UsageError("--dry-run and --execute exclude each other")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        plan = {tp: await _new_offset(admin, args, tp) for tp in await _targets(admin, args)}
        if args.execute:
            await admin.alter_share_group_offsets(args.group, plan)
    if args.json:
        print_json(
            {
                "group": args.group,
                "executed": bool(args.execute),
                "partitions": [
                    {"topic": t, "partition": p, "start_offset": o}
                    for (t, p), o in sorted(plan.items())
                ],
            }
        )
    else:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
            [[args.group, t, p, o] for (t, p), o in sorted(plan.items())],
        )
        print(EXECUTED if args.execute else DRY_RUN)
    return OK


async def _delete_offsets(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        await admin.delete_share_group_offsets(args.group, args.topic)
    if args.json:
        print_json({"group": args.group, "topics": args.topic})
    else:
        print_table(
            ["GROUP", "TOPIC", "STATUS"], [[args.group, t, "Successful"] for t in args.topic]
        )
    return OK


async def _delete(args: argparse.Namespace) -> int:
    if args.all_groups == bool(args.group):
        raise UsageError("give --group (repeatable) or --all-groups")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        names = args.group or [g.group_id for g in await admin.list_groups(types=["share"])]
        results = await admin.delete_groups(names) if names else {}
    failed = {g: e for g, e in results.items() if e is not None}
    if args.json:
        print_json(
            {g: "ok" if e is None else e.error_code.name.upper() for g, e in results.items()}
        )
    else:
        for g, e in results.items():
            if e is None:
                print(f"Deleted share group {g}.")
    for g, e in failed.items():
        fail(f"{e.error_code.name.upper()}: cannot delete share group {g}", KAFKA_ERROR, args)
    return KAFKA_ERROR if failed else OK


def _add_reset(actions: Any) -> None:
    reset = actions.add_parser(
        "reset-offsets", help="set the start offset of an empty group (dry run by default)"
    )
    add_common(reset)
    reset.add_argument("--group", required=True)
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--topic", action="append", metavar="TOPIC[:P,P]", help="repeatable; all partitions"
    )
    where.add_argument("--all-topics", action="store_true", help="every topic the group has")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS.sss")
    to.add_argument("--to-offset", type=int, metavar="OFFSET")
    reset.add_argument("--dry-run", action="store_true", help="only show the new offsets")
    reset.add_argument("--execute", action="store_true", help="apply the new offsets")
    reset.set_defaults(func=lambda a: run(_reset, a))


def add_parser(sub: Any) -> None:
    p = sub.add_parser("share-groups", help="list, describe, reset and delete share groups")
    actions = p.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="list share groups")
    add_common(listing)
    listing.add_argument(
        "--state", action="append", nargs="?", const="", metavar="STATE[,STATE]",
        help="show each group's state; with values, only groups in those states",
    )  # fmt: skip
    listing.set_defaults(func=lambda a: run(_list, a))

    describe = actions.add_parser("describe", help="members, assignment, offsets and lag")
    add_common(describe)
    describe.add_argument("--group", action="append", help="repeatable")
    describe.add_argument("--all-groups", action="store_true", help="every share group")
    describe.add_argument("--members", action="store_true", help="only the members")
    describe.add_argument("--offsets", action="store_true", help="only the partitions")
    describe.add_argument("--state", action="store_true", help="only the group state")
    describe.add_argument("--verbose", action="store_true", help="members' rack and topics")
    describe.set_defaults(func=lambda a: run(_describe, a))

    _add_reset(actions)

    delete_offsets = actions.add_parser(
        "delete-offsets", help="forget an empty group's offsets on topics"
    )
    add_common(delete_offsets)
    delete_offsets.add_argument("--group", required=True)
    delete_offsets.add_argument("--topic", action="append", required=True)
    delete_offsets.set_defaults(func=lambda a: run(_delete_offsets, a))

    delete = actions.add_parser("delete", help="delete empty share groups")
    add_common(delete)
    delete.add_argument("--group", action="append", help="repeatable")
    delete.add_argument("--all-groups", action="store_true", help="every (empty) share group")
    delete.set_defaults(func=lambda a: run(_delete, a))
