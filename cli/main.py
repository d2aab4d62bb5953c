"""`shoal`: the broker and its tools.

`shoal serve --host H --port P --data-dir D --metrics-port M [--config FILE]` is relied on by
outside tooling: keep that command line stable (its options live in `broker.main`).

The tools (`topics`, `share-groups`, `consumer-groups`, `configs`, `acls`, `users`,
`produce`, `consume`, `console-consumer`, `get-offsets`, `share-state`, `dlq`) live in `cli/`, one
module per command group; `share-groups`, `topics` and `configs` also take Kafka's own command
lines (`cli/kafka_style.py`). Exit codes: 0 ok, 1 a
Kafka error reported by the broker (or an unknown name), 2 usage, 3 the broker unreachable.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys

from cli import acls
from cli import configs
from cli import console_consumer
from cli import consume
from cli import consumer_groups
from cli import dlq
from cli import get_offsets
from cli import kafka_style
from cli import log_dirs
from cli import migrate
from cli import produce
from cli import serve
from cli import share_groups
from cli import share_state
from cli import topics
from cli import transactions
from cli import users

COMMANDS = (
    serve,
    topics,
    share_groups,
    consumer_groups,
    configs,
    acls,
    users,
    produce,
    consume,
    console_consumer,
    get_offsets,
    log_dirs,
    share_state,
    transactions,
    migrate,
    dlq,
)


def _version() -> str:
    try:
        return importlib.metadata.version("shoal")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shoal", description="A Kafka-protocol broker for share groups."
    )
    # Kafka's tools print their version with --version and exit 0 (CommandLineUtils).
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    try:
        line = kafka_style.rewrite(sys.argv[1:] if argv is None else argv)
    except kafka_style.KafkaStyleError as e:
        p.error(str(e))
    args = p.parse_args(line)
    code: int = args.func(args)
    return code
