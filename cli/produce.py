"""`shoal produce`: send records for a quick trial (values as arguments, or lines on stdin).

Like kafka-console-producer.sh, `--property parse.key=true` reads each line as a key and a
value split at the first `key.separator` (default a tab); a line without the separator is
refused with Kafka's message, `No key separator found on line number N: 'LINE'`
(`LineMessageReader` in apache/kafka tools/), exit 2; nothing is sent (Kafka has sent the
lines before it by then).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.common import OK
from cli.common import UsageError
from cli.common import add_common
from cli.common import print_json
from cli.common import run
from cli.common import security
from client.producer import Producer

PROPERTIES = ("parse.key", "key.separator")


def _properties(items: list[str] | None) -> dict[str, str]:
    props = {"parse.key": "false", "key.separator": "\t"}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or name not in PROPERTIES:
            raise UsageError(f"--property {item!r}: expected one of {', '.join(PROPERTIES)}=VALUE")
        props[name] = value
    if not props["key.separator"]:
        raise UsageError("--property key.separator= must not be empty")
    return props


def _records(args: argparse.Namespace) -> list[tuple[bytes | None, bytes]]:
    """(key, value) per value argument or stdin line."""
    props = _properties(args.property)
    lines = args.value if args.value else [line.rstrip("\n") for line in sys.stdin]
    default_key = args.key.encode() if args.key is not None else None
    if props["parse.key"].lower() != "true":
        return [(default_key, line.encode()) for line in lines]
    out: list[tuple[bytes | None, bytes]] = []
    separator = props["key.separator"]
    for number, line in enumerate(lines, 1):
        key, sep, value = line.partition(separator)
        if not sep:
            raise UsageError(f"No key separator found on line number {number}: '{line}'")
        out.append((key.encode(), value.encode()))
    return out


async def _produce(args: argparse.Namespace) -> int:
    records = _records(args)
    sent = []
    async with Producer(args.bootstrap_server, linger_ms=5, security=security(args)) as producer:
        for key, value in records:
            partition, offset = await producer.send(
                args.topic, value, key=key, partition=args.partition
            )
            sent.append({"partition": partition, "offset": offset})
    if args.json:
        print_json({"topic": args.topic, "records": sent})
    else:
        print(f"Produced {len(sent)} record(s) to {args.topic}.")
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("produce", help="produce records (arguments, or stdin lines)")
    add_common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--key", help="the same key for every record")
    p.add_argument("--partition", type=int, help="default: by key, else round robin")
    p.add_argument(
        "--property",
        action="append",
        metavar="NAME=VALUE",
        help="parse.key=true: each line is KEY<key.separator>VALUE; key.separator=SEP "
        "(default a tab); repeatable",
    )
    p.add_argument("value", nargs="*", help="record values (default: one per stdin line)")
    p.set_defaults(func=lambda a: run(_produce, a))
