"""`shoal consume`: a share consumer for quick trials (like kafka-console-share-consumer.sh).

Each delivered record is acknowledged explicitly with `--ack` (accept by default; release
makes it available again, reject archives it). Stops after `--max-messages` records, or when
nothing arrives for `--timeout` seconds. A topic that does not exist is an error (exit 1),
before the group is joined (so it is not created).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from cli.common import OK
from cli.common import NotFound
from cli.common import add_common
from cli.common import run
from cli.common import security
from client.admin import Admin
from client.records import ConsumerRecord
from client.share_acks import AcknowledgeType
from client.share_consumer import ShareConsumer

ACKS = {
    "accept": AcknowledgeType.ACCEPT,
    "release": AcknowledgeType.RELEASE,
    "reject": AcknowledgeType.REJECT,
}


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


def _show(r: ConsumerRecord, as_json: bool) -> None:
    if as_json:
        doc = {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "delivery_count": r.delivery_count,
            "key": _text(r.key),
            "value": _text(r.value),
        }
        print(json.dumps(doc), flush=True)
    else:
        print(_text(r.value) or "", flush=True)


async def _consume(args: argparse.Namespace) -> int:
    ack = ACKS[args.ack]
    # A missing topic is said before joining: a share consumer's subscription would wait for
    # it silently, and joining would create the group.
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        missing = sorted(set(args.topic) - set(await admin.list_topics()))
    if missing:
        names = ", ".join(repr(t) for t in missing)
        raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {names} (the group was not joined)")
    loop = asyncio.get_running_loop()
    received = 0
    async with ShareConsumer(
        args.bootstrap_server, args.group, acknowledgement_mode="explicit", security=security(args)
    ) as consumer:
        consumer.subscribe(args.topic)
        idle_until = loop.time() + args.timeout
        while args.max_messages is None or received < args.max_messages:
            records = await consumer.poll(min(0.5, max(idle_until - loop.time(), 0.05)))
            if not records and loop.time() >= idle_until:
                break
            for r in records:
                if args.max_messages is not None and received >= args.max_messages:
                    break  # not acknowledged: released when we leave
                _show(r, args.json)
                consumer.acknowledge(r, ack)
                received += 1
            if records:
                await consumer.commit_sync()
                idle_until = loop.time() + args.timeout
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("consume", help="consume records as a share-group member")
    add_common(p)
    p.add_argument("--topic", action="append", required=True, help="repeatable")
    p.add_argument("--group", required=True, help="the share group")
    p.add_argument("--ack", choices=sorted(ACKS), default="accept", help="default accept")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="stop when nothing arrives for this long (default 10)",
    )
    p.set_defaults(func=lambda a: run(_consume, a), command_timeout=None)
