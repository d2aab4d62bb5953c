"""`shoal log-dirs describe`: the bytes each partition's log takes in each broker's log dirs,
like kafka-log-dirs.sh --describe (DescribeLogDirs; DESCRIBE on the cluster).

    shoal log-dirs describe --topic-list orders,payments
    shoal log-dirs --describe --bootstrap-server 127.0.0.1:9092 --broker-list 1

Kafka's options and output (`LogDirsCommand` in apache/kafka tools/): `--topic-list` keeps
those topics (default: all; filtered here, as Kafka asks for every partition and filters),
`--broker-list` those brokers (one not in the cluster is an error, exit 1). Two lines of
progress, then one line of JSON: `{"version":1,"brokers":[{"broker":B,"logDirs":[{"logDir":
PATH,"error":null,"partitions":[{"partition":"topic-P","size":BYTES,"offsetLag":0,
"isFuture":false}]}]}]}`; a log dir's error is its Kafka error name (Kafka prints the
exception's Java class). `--json` prints that document alone, indented.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from cli.common import KAFKA_ERROR
from cli.common import OK
from cli.common import UsageError
from cli.common import add_common
from cli.common import fail
from cli.common import print_json
from cli.common import run
from cli.common import security
from cli.common import split_commas
from client.admin import Admin
from client.log_dirs import LogDirDescription
from client.log_dirs import describe_log_dirs


def _brokers(text: str) -> set[int]:
    try:
        return {int(b) for b in split_commas(text)}
    except ValueError:
        raise UsageError(f"--broker-list expects broker ids like 0,1,2, got {text!r}") from None


def _log_dir(d: LogDirDescription, topics: set[str]) -> dict[str, Any]:
    return {
        "logDir": d.path,
        "error": None if d.error is None else d.error.error_code.name.upper(),
        "partitions": [
            {"partition": f"{t}-{p}", "size": r.size, "offsetLag": r.offset_lag,
             "isFuture": r.is_future}
            for (t, p), r in sorted(d.replicas.items())
            if not topics or t in topics
        ],
    }  # fmt: skip


async def _describe(args: argparse.Namespace) -> int:
    topics = set(split_commas(args.topic_list))
    asked = _brokers(args.broker_list)
    async with Admin(args.bootstrap_server, security=security(args)) as admin:
        cluster = set(admin.cluster.node_ids)
        missing = asked - cluster
        if missing:
            return fail(
                "ERROR: The given brokers do not exist from --broker-list: "
                f"{_ids(missing)}. Current existent brokers: {_ids(cluster)}",
                KAFKA_ERROR,
                args,
            )
        brokers = sorted(asked or cluster)
        if not args.json:
            print("Querying brokers for log directories information")
        described = await describe_log_dirs(admin.cluster, None, brokers)
    document = {
        "version": 1,
        "brokers": [
            {"broker": b, "logDirs": [_log_dir(d, topics) for d in dirs]}
            for b, dirs in described.items()
        ],
    }
    if args.json:
        print_json(document)
    else:
        print(f"Received log directory information from brokers {_ids(set(brokers))}")
        print(json.dumps(document, separators=(",", ":")))
    return OK


def _ids(ids: set[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def add_parser(sub: Any) -> None:
    p = sub.add_parser("log-dirs", help="partitions' bytes in the log dirs (kafka-log-dirs)")
    actions = p.add_subparsers(dest="action", required=True)
    d = actions.add_parser("describe", help="each broker's log dirs and partition sizes")
    add_common(d)
    d.add_argument("--topic-list", default="", metavar="T[,T]", help="these topics (default all)")
    d.add_argument("--broker-list", default="", metavar="B[,B]", help="these brokers (all)")
    d.set_defaults(func=lambda a: run(_describe, a))
