"""`shoal topics`: create, list, describe and delete topics (like kafka-topics.sh)."""

from __future__ import annotations

import argparse
from typing import Any

from cli.common import OK
from cli.common import NotFound
from cli.common import add_common
from cli.common import parse_key_values
from cli.common import print_json
from cli.common import print_table
from cli.common import run
from cli.common import security
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource


async def _create(args: argparse.Namespace) -> int:
    configs: dict[str, str] = {}
    for text in args.config or ():
        configs.update(parse_key_values(text))
    # Without --partitions the broker's num.partitions decides (-1, as kafka-topics.sh sends).
    partitions = -1 if args.partitions is None else args.partitions
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        topic_id = await admin.create_topic(
            args.topic, partitions, configs, replication_factor=args.replication_factor
        )
        if partitions == -1:
            partitions = len((await admin.list_topics())[args.topic].partitions)
    if args.json:
        print_json({"topic": args.topic, "topic_id": str(topic_id), "partitions": partitions})
    else:
        print(f"Created topic {args.topic}.")
    return OK


async def _list(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        names = sorted(await admin.list_topics())
    if args.json:
        print_json(names)
    else:
        for name in names:
            print(name)
    return OK


async def _describe(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        topics = await admin.list_topics()
        if args.topic is not None and args.topic not in topics:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {args.topic!r}")
        names = [args.topic] if args.topic else sorted(topics)
        out: list[dict[str, Any]] = []
        for name in names:
            entries = await admin.describe_config_entries(ConfigResourceType.TOPIC, name)
            info = topics[name]
            out.append(
                {
                    "topic": name,
                    "topic_id": str(info.topic_id),
                    "partitions": [
                        {"partition": p.partition, "leader": p.leader_id}
                        for _, p in sorted(info.partitions.items())
                    ],
                    "configs": {
                        e.name: e.value
                        for e in entries
                        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
                    },
                }
            )
    if args.json:
        print_json(out)
        return OK
    for t in out:
        configs = ",".join(f"{k}={v}" for k, v in sorted(t["configs"].items()))
        print(
            f"Topic: {t['topic']}\tTopicId: {t['topic_id']}\t"
            f"PartitionCount: {len(t['partitions'])}\tReplicationFactor: 1\tConfigs: {configs}"
        )
        print_table(
            ["", "PARTITION", "LEADER", "REPLICAS", "ISR"],
            [["", p["partition"], p["leader"], p["leader"], p["leader"]] for p in t["partitions"]],
        )
    return OK


async def _delete(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        await admin.delete_topic(args.topic)
    if args.json:
        print_json({"topic": args.topic, "deleted": True})
    else:
        print(f"Deleted topic {args.topic}.")
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, list, describe and delete topics")
    actions = p.add_subparsers(dest="action", required=True)

    create = actions.add_parser("create", help="create a topic")
    add_common(create)
    create.add_argument("--topic", required=True)
    create.add_argument(
        "--partitions", type=int, help="partition count (default: the broker's num.partitions)"
    )
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument(
        "--config", action="append", metavar="K=V[,K=V]", help="topic config(s); repeatable"
    )
    create.set_defaults(func=lambda a: run(_create, a))

    listing = actions.add_parser("list", help="list topic names")
    add_common(listing)
    listing.set_defaults(func=lambda a: run(_list, a))

    describe = actions.add_parser("describe", help="partitions and configs of topics")
    add_common(describe)
    describe.add_argument("--topic", help="one topic (default: all)")
    describe.set_defaults(func=lambda a: run(_describe, a))

    delete = actions.add_parser("delete", help="delete a topic")
    add_common(delete)
    delete.add_argument("--topic", required=True)
    delete.set_defaults(func=lambda a: run(_delete, a))
