"""`shoal produce`: send records for a quick trial (values as arguments, or lines on stdin)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cli.common import OK
from cli.common import add_common
from cli.common import print_json
from cli.common import run
from cli.common import security
from client.producer import Producer


async def _produce(args: argparse.Namespace) -> int:
    values = args.value if args.value else [line.rstrip("\n") for line in sys.stdin]
    key = args.key.encode() if args.key is not None else None
    sent = []
    async with Producer(args.bootstrap_server, linger_ms=5, security=security(args)) as producer:
        for value in values:
            partition, offset = await producer.send(
                args.topic, value.encode(), key=key, partition=args.partition
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
    p.add_argument("value", nargs="*", help="record values (default: one per stdin line)")
    p.set_defaults(func=lambda a: run(_produce, a))
