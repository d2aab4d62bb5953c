"""`shoal get-offsets`: partitions' offsets for a time, like kafka-get-offsets.sh.

    shoal get-offsets --topic 'orders|payments' --partitions 0,1 --time -2

Kafka's options and output (`GetOffsetShell` in apache/kafka tools/): `--topic` is a regular
expression (default: every topic), `--partitions` a comma list of ids, `--time` -1 or latest
(the default), -2 or earliest, -3 or max-timestamp, -4 or earliest-local, or a timestamp in ms
(the first offset at or after it). One `topic:partition:offset` line per partition, sorted as
Kafka sorts them; a partition without an offset for the time (a timestamp after its last
record) is left out. Nothing matching the filters is an error (exit 1).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import print_json
from cli.common import run
from cli.common import security
from client.admin import Admin

# ListOffsets' special timestamps, by the names kafka-get-offsets.sh takes.
NAMED = {
    "latest": -1,
    "earliest": -2,
    "max-timestamp": -3,
    "earliest-local": -4,
    "latest-tiered": -5,
    "earliest-pending-upload": -6,
}


def _time(text: str) -> int:
    if text in NAMED:
        return NAMED[text]
    try:
        return int(text)
    except ValueError:
        raise UsageError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
            "max-timestamp / -4 or earliest-local, or a timestamp in milliseconds"
        ) from None


def _partitions(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(p) for p in text.split(",")}
    except ValueError:
        raise UsageError(
            "--partitions expects a comma separated list of numeric partition ids, "
            f"but received: {text}"
        ) from None


async def _get_offsets(args: argparse.Namespace) -> int:
    timestamp = _time(args.time)
    wanted = _partitions(args.partitions)
    try:
        pattern = re.compile(args.topic or ".*")
    except re.error as e:
        raise UsageError(f"--topic {args.topic!r} is not a regular expression: {e}") from None
    found: dict[tuple[str, int], int] = {}
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        topics = await admin.list_topics()
        targets = [
            (name, p)
            for name, info in topics.items()
            if pattern.fullmatch(name)
            for p in info.partitions
            if wanted is None or p in wanted
        ]
        if not targets:
            raise NotFound("Could not match any topic-partitions with the specified filters")
        for t, p in targets:
            offset = await admin.list_offsets(t, p, timestamp)
            if offset >= 0:  # -1: no offset for that time, left out as Kafka does
                found[(t, p)] = offset
    rows = sorted(found.items(), key=lambda item: f"{item[0][0]}-{item[0][1]}")
    if args.json:
        print_json([{"topic": t, "partition": p, "offset": o} for (t, p), o in rows])
    else:
        for (t, p), o in rows:
            print(f"{t}:{p}:{o}")
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("get-offsets", help="partitions' offsets for a time (kafka-get-offsets)")
    add_common(p)
    p.add_argument("--topic", metavar="REGEX", help="topics this matches (default: all)")
    p.add_argument("--partitions", metavar="P[,P]", help="only these partition ids")
    p.add_argument(
        "--time",
        default="latest",
        metavar="TIME",
        help="-1/latest (default), -2/earliest, -3/max-timestamp, -4/earliest-local, or ms",
    )
    p.set_defaults(func=lambda a: run(_get_offsets, a))
