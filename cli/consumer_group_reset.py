"""`shoal consumer-groups --reset-offsets`: new committed offsets for inactive groups, as
kafka-consumer-groups.sh computes them (a dry run unless `--execute`).

A group with members is refused before anything is computed or committed, dry run or not, with
Kafka's own message (`ConsumerGroupCommand.resetOffsets`: only an Empty or Dead group, or one
that does not exist, is reset): its members would overwrite the new offsets at their next
commit. Kafka's tool then exits 0; Shoal exits 1, its code for a refusal a script must see.
"""

from __future__ import annotations

import argparse
import time

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import fail
from cli.common import print_json
from cli.common import print_table
from cli.offset_specs import named_partitions
from cli.offset_specs import parse_datetime_ms
from cli.offset_specs import parse_duration_ms
from client.admin import Admin

TopicPartition = tuple[str, int]
TO = ("to_earliest", "to_latest", "to_datetime", "by_duration", "to_offset", "shift_by")
INACTIVE = {"Empty", "Dead"}


async def _targets(admin: Admin, args: argparse.Namespace, group: str) -> list[TopicPartition]:
    if args.all_topics:
        committed = await admin.list_consumer_group_offsets(group)
        if not committed:
            raise UsageError(f"group {group} has no committed offsets: name them with --topic")
        return sorted(committed)
    if not args.topic:
        raise UsageError("--reset-offsets needs --topic or --all-topics")
    return await named_partitions(admin, args.topic)


async def _by_time(admin: Admin, tp: TopicPartition, timestamp_ms: int, latest: int) -> int:
    found = await admin.list_offsets(tp[0], tp[1], timestamp_ms)
    return latest if found < 0 else found


async def _new_offset(
    admin: Admin, args: argparse.Namespace, tp: TopicPartition, current: int | None
) -> int:
    earliest = await admin.list_offsets(tp[0], tp[1], "earliest")
    latest = await admin.list_offsets(tp[0], tp[1], "latest")
    if args.to_earliest:
        return earliest
    if args.to_latest:
        return latest
    if args.to_datetime is not None:
        return await _by_time(admin, tp, parse_datetime_ms(args.to_datetime), latest)
    if args.by_duration is not None:
        since = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        return await _by_time(admin, tp, since, latest)
    if args.shift_by is not None:
        if current is None:
            raise NotFound(f"{tp[0]}-{tp[1]} has no committed offset to shift")
        wanted = current + int(args.shift_by)
    else:
        wanted = int(args.to_offset)
    return min(max(wanted, earliest), latest)  # out of range: the nearest end, as Kafka


async def _active_state(admin: Admin, group: str) -> str | None:
    """The group's state if it has members (not Empty or Dead), else None."""
    desc = await admin.describe_consumer_group(group)
    return None if desc is None or desc.state in INACTIVE else desc.state


async def _plan(admin: Admin, args: argparse.Namespace, group: str) -> dict[TopicPartition, int]:
    current = {tp: c.offset for tp, c in (await admin.list_consumer_group_offsets(group)).items()}
    return {
        tp: await _new_offset(admin, args, tp, current.get(tp))
        for tp in await _targets(admin, args, group)
    }


def check_options(args: argparse.Namespace) -> None:
    if args.dry_run and args.execute:
        raise UsageError("--dry-run and --execute exclude each other")
    if not any(getattr(args, k) is not None and getattr(args, k) is not False for k in TO):
        raise UsageError("--reset-offsets needs one of --" + ", --".join(TO).replace("_", "-"))


async def reset(args: argparse.Namespace, admin: Admin, groups: list[str]) -> int:
    """Reset each group in turn; an active group is refused (and the others still reset)."""
    plans: dict[str, dict[TopicPartition, int]] = {}
    failed = False
    for group in groups:
        state = await _active_state(admin, group)
        if state is not None:
            fail(f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                 f"but the current state is {state}.", KAFKA_ERROR, args)  # fmt: skip
            failed = True
            continue
        plan = await _plan(admin, args, group)
        errors = await admin.alter_consumer_group_offsets(group, plan) if args.execute else {}
        for (t, p), e in errors.items():
            if e is not None:  # a member joined since: this partition was not reset
                fail(f"{e.error_code.name.upper()}: {t}-{p} not reset", KAFKA_ERROR, args)
                failed = True
        plans[group] = {tp: o for tp, o in plan.items() if errors.get(tp) is None}
    _print(args, plans)
    return KAFKA_ERROR if failed else OK


def _print(args: argparse.Namespace, plans: dict[str, dict[TopicPartition, int]]) -> None:
    if args.json:
        docs = [
            {"group": group, "executed": bool(args.execute),
             "partitions": [{"topic": t, "partition": p, "new_offset": o}
                            for (t, p), o in sorted(plan.items())]}
            for group, plan in plans.items()
        ]  # fmt: skip
        if docs:
            print_json(docs[0] if len(docs) == 1 and not args.all_groups else docs)
        return
    if not plans:
        return
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [[g, t, p, o] for g, plan in plans.items() for (t, p), o in sorted(plan.items())],
    )
    print("\nExecuted: the offsets above are committed." if args.execute else
          "\nDry run: nothing changed (add --execute to commit these offsets).")  # fmt: skip
