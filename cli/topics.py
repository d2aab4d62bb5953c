"""`shoal topics`: create, alter, list, describe and delete topics (like kafka-topics.sh), and
delete records below an offset (like kafka-delete-records.sh).

As in kafka-topics.sh, `--topic` is a regular expression (matched against the whole name) for
list and describe, `--if-not-exists` makes create, and `--if-exists` alter and delete, quiet
when there is nothing to do.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from cli.common import OK
from cli.common import NotFound
from cli.common import UsageError
from cli.common import add_common
from cli.common import parse_key_values
from cli.common import print_json
from cli.common import run
from cli.common import security
from cli.common import split_commas
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource
from client.errors import KafkaError


async def _create(args: argparse.Namespace) -> int:
    configs: dict[str, str] = {}
    for text in args.config or ():
        configs.update(parse_key_values(text))
    # Without --partitions the broker's num.partitions decides (-1, as kafka-topics.sh sends).
    partitions = -1 if args.partitions is None else args.partitions
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        if args.if_not_exists and args.topic in await admin.list_topics():
            return OK
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


def _matching(pattern: str | None, names: Any) -> list[str]:
    """Names `pattern` matches whole (a plain name matches itself), sorted; all when None."""
    if pattern is None:
        return sorted(names)
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise UsageError(f"--topic {pattern!r} is not a regular expression: {e}") from None
    return sorted(n for n in names if regex.fullmatch(n))


async def _list(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        names = _matching(args.topic, await admin.list_topics())
    if args.json:
        print_json(names)
    else:
        for name in names:
            print(name)
    return OK


async def _describe(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        topics = await admin.list_topics()
        names = _matching(args.topic, topics)
        if args.topic is not None and not names and not args.if_exists:
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {args.topic!r}")
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
                    # The text line shows what Kafka's does: every config not at its default.
                    "_not_default": {
                        e.name: e.value for e in entries if e.source != ConfigSource.DEFAULT_CONFIG
                    },
                }
            )
    if args.json:
        print_json([{k: v for k, v in t.items() if k != "_not_default"} for t in out])
        return OK
    for t in out:
        _print_kafka_lines(t)
    return OK


def _print_kafka_lines(t: dict[str, Any]) -> None:
    """kafka-topics.sh --describe's lines (`TopicCommand.TopicDescription/PartitionDescription
    .printDescription`): tab-separated `Name: value` fields, a topic line, then one line per
    partition. One broker: replicas and ISR are the leader. Elr and LastKnownElr read N/A, as
    Kafka's tool prints them for a broker without DescribeTopicPartitions (KIP-966)."""
    configs = ",".join(f"{k}={v}" for k, v in sorted(t["_not_default"].items()))
    print(
        f"Topic: {t['topic']}\tTopicId: {t['topic_id']}\tPartitionCount: {len(t['partitions'])}"
        f"\tReplicationFactor: 1\tConfigs: {configs}"
    )
    for p in t["partitions"]:
        leader = p["leader"] if p["leader"] >= 0 else "none"
        replicas = p["leader"] if p["leader"] >= 0 else ""
        print(
            f"\tTopic: {t['topic']}\tPartition: {p['partition']}\tLeader: {leader}"
            f"\tReplicas: {replicas}\tIsr: {replicas}\tElr: N/A\tLastKnownElr: N/A"
        )


async def _alter(args: argparse.Namespace) -> int:
    """More partitions, and topic configs set (--config) or deleted (--delete-config)."""
    changes: dict[str, str | None] = {}
    for text in args.config or ():
        changes.update(parse_key_values(text))
    for text in args.delete_config or ():
        changes.update(dict.fromkeys(split_commas(text)))
    if args.partitions is None and not changes:
        raise UsageError("nothing to alter: give --partitions, --config or --delete-config")
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        if args.topic not in await admin.list_topics():
            if args.if_exists:
                return OK
            raise NotFound(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {args.topic!r}")
        if args.partitions is not None:
            await admin.create_partitions(args.topic, args.partitions)
        if changes:
            await admin.incremental_alter_configs(ConfigResourceType.TOPIC, args.topic, changes)
    if args.json:
        print_json({"topic": args.topic, "partitions": args.partitions, "configs": changes})
    else:
        print(f"Altered topic {args.topic}.")
    return OK


async def _delete(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        try:
            await admin.delete_topic(args.topic)
        except KafkaError as e:
            if args.if_exists and _unknown_topic(e):
                return OK
            raise
    if args.json:
        print_json({"topic": args.topic, "deleted": True})
    else:
        print(f"Deleted topic {args.topic}.")
    return OK


def _unknown_topic(e: KafkaError) -> bool:
    return e.error_code.name.upper() == "UNKNOWN_TOPIC_OR_PARTITION"


def _offsets_json(path: str) -> dict[tuple[str, int], int]:
    """kafka-delete-records.sh's file: {"partitions": [{"topic", "partition", "offset"}, ...],
    "version": 1}."""
    try:
        body = json.loads(Path(path).read_text())
        return {
            (str(p["topic"]), int(p["partition"])): int(p["offset"]) for p in body["partitions"]
        }
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from e
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path} is not an offset JSON file: {e!r}") from e


def _delete_records_targets(args: argparse.Namespace) -> dict[tuple[str, int], int]:
    simple = (args.topic, args.partition, args.offset)
    if args.offset_json_file is not None:
        if any(v is not None for v in simple):
            raise UsageError("give --offset-json-file or --topic/--partition/--offset, not both")
        return _offsets_json(args.offset_json_file)
    if any(v is None for v in simple):
        raise UsageError("give --offset-json-file, or all of --topic, --partition and --offset")
    return {(args.topic, args.partition): args.offset}


async def _delete_records(args: argparse.Namespace) -> int:
    targets = _delete_records_targets(args)
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        low = await admin.delete_records(targets)
    rows = sorted(low.items())
    if args.json:
        print_json([{"topic": t, "partition": p, "low_watermark": w} for (t, p), w in rows])
    else:
        print("Records delete operation completed:")
        for (t, p), w in rows:
            print(f"partition: {t}-{p}\tlow_watermark: {w}")
    return OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, alter, list, describe and delete topics")
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
    create.add_argument("--if-not-exists", action="store_true", help="no error if it exists")
    create.set_defaults(func=lambda a: run(_create, a))

    alter = actions.add_parser("alter", help="add partitions to a topic, or change its configs")
    add_common(alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, help="the new partition count (only grows)")
    alter.add_argument("--config", action="append", metavar="K=V[,K=V]", help="set configs")
    alter.add_argument("--delete-config", action="append", metavar="K[,K]", help="drop configs")
    alter.add_argument("--if-exists", action="store_true", help="no error if it does not exist")
    alter.set_defaults(func=lambda a: run(_alter, a))

    listing = actions.add_parser("list", help="list topic names")
    add_common(listing)
    listing.add_argument("--topic", metavar="REGEX", help="only the names this matches")
    listing.set_defaults(func=lambda a: run(_list, a))

    describe = actions.add_parser("describe", help="partitions and configs of topics")
    add_common(describe)
    describe.add_argument("--topic", metavar="REGEX", help="a name or regex (default: all)")
    describe.add_argument("--if-exists", action="store_true", help="no error if none matches")
    describe.set_defaults(func=lambda a: run(_describe, a))

    delete = actions.add_parser("delete", help="delete a topic")
    add_common(delete)
    delete.add_argument("--topic", required=True)
    delete.add_argument("--if-exists", action="store_true", help="no error if it does not exist")
    delete.set_defaults(func=lambda a: run(_delete, a))

    records = actions.add_parser(
        "delete-records", help="delete the records below an offset (move the low watermark)"
    )
    add_common(records)
    records.add_argument(
        "--offset-json-file",
        metavar="FILE",
        help='kafka-delete-records.sh\'s JSON: {"partitions": [{"topic": "t", "partition": 0, '
        '"offset": 10}], "version": 1}',
    )
    records.add_argument("--topic")
    records.add_argument("--partition", type=int)
    records.add_argument("--offset", type=int, help="-1: every record up to the high watermark")
    records.set_defaults(func=lambda a: run(_delete_records, a))
