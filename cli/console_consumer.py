"""`shoal console-consumer`: read a topic like kafka-console-consumer.sh, alone or as a member
of a consumer group (`shoal consume` is the share-group consumer).

Kafka's options and rules (`ConsoleConsumerOptions`, `ConsoleConsumer`, apache/kafka tools/):
- `--topic T` alone reads every partition from its end, or from its start with
  `--from-beginning`; `--partition P` reads one, from `--offset earliest|latest|N` (default
  latest). `--offset` needs `--partition`; `--from-beginning` and `--offset` exclude each other;
  `--group` and `--partition` too (usage errors, exit 2).
- `--group G` joins the consumer group (KIP-848 heartbeats) and starts from its committed
  offsets, else from the end (`--from-beginning`: the start); it commits what it printed as it
  goes and when it stops, then leaves the group. A classic group (JoinGroup clients) cannot be
  joined that way: an empty one is read from its committed offsets and committed to without
  joining (as the admin client commits); one with members is refused (exit 1).
- `--isolation-level read_uncommitted|read_committed` (default read_uncommitted, as Kafka's
  consumer): read_committed reads up to the last stable offset and skips the records of
  aborted transactions (`client.read_committed`).
- `--max-messages N` stops after N records; `--timeout-ms MS` stops when nothing arrives for
  that long (exit 0, as Kafka). "Processed a total of N messages" goes to stderr at the end.
- `--property print.key=true`, `print.timestamp=true` (`CreateTime:ms`), `print.partition`,
  `print.offset`, `print.value` (default true), `key.separator` (default a tab) and
  `null.literal` (default `null`), as `DefaultMessageFormatter` prints them.
A topic that does not exist is said so, exit 1 (nothing is created, no group is joined).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from kio.schema.errors import ErrorCode

from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import run
from cli.common import security
from client.admin import Admin
from client.errors import KafkaError
from client.group_member import GroupMember
from client.read_committed import LEVELS
from client.records import LOG_APPEND_TIME
from client.records import ConsumerRecord
from client.topic_reader import Fetched
from client.topic_reader import fetch_records

TopicPartition = tuple[str, int]
FLAGS = ("print.key", "print.timestamp", "print.partition", "print.offset", "print.value")
TEXTS = ("key.separator", "null.literal")


def _properties(items: list[str] | None) -> dict[str, str]:
    props = {"print.value": "true", "key.separator": "\t", "null.literal": "null"}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or name not in FLAGS + TEXTS:
            raise UsageError(f"--property {item!r}: one of {', '.join(FLAGS + TEXTS)}=VALUE")
        props[name] = value
    return props


class Formatter:
    """`DefaultMessageFormatter`: the fields asked for, joined by key.separator, one line each."""

    def __init__(self, props: dict[str, str]) -> None:
        self.on = {f: props.get(f, "false").strip().lower() == "true" for f in FLAGS}
        self.separator = props["key.separator"]
        self.null = props["null.literal"]

    def line(self, r: ConsumerRecord) -> str:
        fields = []
        if self.on["print.timestamp"]:
            kind = "LogAppendTime" if r.timestamp_type == LOG_APPEND_TIME else "CreateTime"
            fields.append(f"{kind}:{r.timestamp_ms}")
        if self.on["print.partition"]:
            fields.append(f"Partition:{r.partition}")
        if self.on["print.offset"]:
            fields.append(f"Offset:{r.offset}")
        if self.on["print.key"]:
            fields.append(self._text(r.key))
        if self.on["print.value"]:
            fields.append(self._text(r.value))
        return self.separator.join(fields)

    def _text(self, data: bytes | None) -> str:
        return self.null if data is None else data.decode(errors="replace")


def _check(args: argparse.Namespace) -> None:
    if args.partition is not None:
        if args.group is not None:
            raise UsageError("Options group and partition cannot be specified together.")
        if args.from_beginning and args.offset is not None:
            raise UsageError("Options from-beginning and offset cannot be specified together.")
    elif args.offset is not None:
        raise UsageError("The partition is required when offset is specified.")
    if args.offset not in (None, "earliest", "latest") and not (
        args.offset.isdigit() and int(args.offset) >= 0
    ):
        raise UsageError(f"The provided offset value '{args.offset}' is incorrect. Valid values "
                         "are 'earliest', 'latest', or a non-negative long.")  # fmt: skip


async def _start(admin: Admin, tp: TopicPartition, where: str) -> int:
    """`where`: earliest, latest or an offset."""
    if where in ("earliest", "latest"):
        return await admin.list_offsets(tp[0], tp[1], where)  # type: ignore[arg-type]
    return int(where)


class Session:
    """What is being read: the positions, and the group member if any."""

    def __init__(self, admin: Admin, args: argparse.Namespace) -> None:
        self.admin = admin
        self.args = args
        self.reset = "earliest" if args.from_beginning else "latest"
        self.positions: dict[TopicPartition, int] = {}
        self.member = GroupMember(admin.cluster, args.group, [args.topic]) if args.group else None
        self.next_heartbeat = 0.0
        self.classic = False  # reading an empty classic group without joining it

    async def open(self, partitions: int) -> None:
        if self.member is None:
            if self.args.partition is not None:
                tp = (self.args.topic, self.args.partition)
                self.positions = {tp: await _start(self.admin, tp, self.args.offset or "latest")}
            else:
                for p in range(partitions):
                    tp = (self.args.topic, p)
                    self.positions[tp] = await _start(self.admin, tp, self.reset)
            return
        try:
            await self.tick(force=True)
        except KafkaError as e:
            if e.error_code != ErrorCode.group_id_not_found:
                raise
            await self._open_classic(partitions)

    async def _open_classic(self, partitions: int) -> None:
        """The group id is a classic group's, which a KIP-848 member cannot join (Kafka would
        convert an empty one; Shoal does not). An empty one is read as Kafka's admin client
        writes offsets: every partition, from the committed offsets, committed back outside
        any membership (which the coordinator allows only while the group has no members)."""
        desc = await self.admin.describe_consumer_group(self.args.group)
        if desc is not None and desc.members:
            raise NotFound(f"group {self.args.group!r} is a classic group with members "
                           f"({desc.state}): stop them, or read with another --group")  # fmt: skip
        self.member, self.classic = None, True
        committed = await self.admin.list_consumer_group_offsets(self.args.group)
        for p in range(partitions):
            tp = (self.args.topic, p)
            done = committed.get(tp)
            self.positions[tp] = (
                done.offset
                if done is not None and done.offset >= 0
                else await _start(self.admin, tp, self.reset)
            )

    async def tick(self, *, force: bool = False) -> None:
        """Heartbeat when due; take up newly assigned partitions at their committed offsets."""
        loop = asyncio.get_running_loop()
        if self.member is None or (not force and loop.time() < self.next_heartbeat):
            return
        assigned = await self.member.heartbeat()
        self.next_heartbeat = loop.time() + self.member.interval_s
        new = assigned - self.positions.keys()
        committed = await self.member.committed(new) if new else {}
        for tp in new:
            self.positions[tp] = committed.get(tp, await _start(self.admin, tp, self.reset))
        for tp in self.positions.keys() - assigned:
            del self.positions[tp]

    async def commit(self) -> None:
        if self.member is not None:
            await self.member.commit(self.positions)
        elif self.classic:
            errors = await self.admin.alter_consumer_group_offsets(self.args.group, self.positions)
            for error in errors.values():
                if error is not None:
                    raise error

    async def close(self) -> None:
        if self.member is not None:
            try:
                await self.commit()
            finally:
                await self.member.leave()


async def _read(session: Session, formatter: Formatter, args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    timeout_s = None if args.timeout_ms is None or args.timeout_ms < 0 else args.timeout_ms / 1000
    idle_until = None if timeout_s is None else loop.time() + timeout_s
    count, level = 0, LEVELS[args.isolation_level]
    while args.max_messages is None or count < args.max_messages:
        await session.tick()
        wait_s = 0.5 if idle_until is None else min(0.5, max(idle_until - loop.time(), 0.0))
        fetched = Fetched()
        if not session.positions:
            await asyncio.sleep(wait_s)  # no partition assigned yet: the next heartbeat may
        else:
            fetched = await fetch_records(session.admin.cluster, session.positions,
                                          int(wait_s * 1000), level)  # fmt: skip
        records, moved = fetched.records, False
        for r in records:
            if args.max_messages is not None and count >= args.max_messages:
                break
            print(formatter.line(r), flush=True)
            session.positions[(r.topic, r.partition)] = r.offset + 1
            count += 1
        else:  # all printed: move past what held no record (markers, aborted transactions)
            moved = _skip_to(session.positions, fetched.next_offsets)
        if records or moved:
            await session.commit()
            idle_until = None if timeout_s is None else loop.time() + timeout_s
        elif idle_until is not None and loop.time() >= idle_until:
            break
    return count


def _skip_to(positions: dict[TopicPartition, int], nxt: dict[TopicPartition, int]) -> bool:
    """Positions moved on to `nxt` where it is ahead; whether any moved."""
    moved = False
    for tp, offset in nxt.items():
        if tp in positions and offset > positions[tp]:
            positions[tp], moved = offset, True
    return moved


async def _consume(args: argparse.Namespace) -> int:
    _check(args)
    formatter = Formatter(_properties(args.property))
    count = 0
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        topics = await admin.list_topics()
        if args.topic not in topics:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: topic {args.topic!r} does not exist")
        partitions = topics[args.topic].partition_count
        if args.partition is not None and not 0 <= args.partition < partitions:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: {args.topic} has no partition "
                           f"{args.partition}")  # fmt: skip
        session = Session(admin, args)
        try:
            await session.open(partitions)
            count = await _read(session, formatter, args)
        finally:
            await session.close()
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "console-consumer", help="read a topic, alone or in a consumer group (like "
        "kafka-console-consumer)",
    )  # fmt: skip
    add_common(p, json_output=False)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", help="the consumer group to join (commits its offsets)")
    p.add_argument("--from-beginning", action="store_true",
                   help="without a committed offset, start at the earliest record")  # fmt: skip
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", metavar="earliest|latest|N", help="with --partition: start here")
    p.add_argument("--isolation-level", choices=sorted(LEVELS), default="read_uncommitted",
                   help="read_committed: skip aborted transactions, stop at the last stable "
                   "offset")  # fmt: skip
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, help="stop when nothing arrives for this long")
    p.add_argument("--property", action="append", metavar="NAME=VALUE",
                   help="print.key, print.timestamp, print.partition, print.offset, print.value, "
                   "key.separator, null.literal; repeatable")  # fmt: skip
    p.set_defaults(func=lambda a: run(_consume, a), command_timeout=None)
