"""`shoal`: the broker and its tools.

`shoal serve --host H --port P --data-dir D --metrics-port M [--config FILE]` is relied on by
outside tooling: keep that command line stable.

The tools (`topics`, `share-groups`, `configs`, `produce`, `consume`, `share-state`) live in
`broker/commands/`, one module per command group. Exit codes: 0 ok, 1 a Kafka error reported
by the broker (or an unknown name), 2 usage, 3 the broker cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

import structlog

from broker import logs
from broker.commands import configs
from broker.commands import consume
from broker.commands import produce
from broker.commands import share_groups
from broker.commands import share_state
from broker.commands import topics
from broker.config import BrokerConfig
from broker.loops import loop_factory

COMMANDS = (topics, share_groups, configs, produce, consume, share_state)


def _serve(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if args.host is not None or args.port is not None:
        overrides["listeners"] = (
            f"PLAINTEXT://{args.host or '127.0.0.1'}:{args.port if args.port is not None else 9092}"
        )
    if args.data_dir is not None:
        overrides["log.dirs"] = str(args.data_dir)
    if args.metrics_port is not None:
        overrides["metrics.port"] = args.metrics_port
    try:
        config = BrokerConfig.load(file=args.config, overrides=overrides)
    except (OSError, ValueError) as e:
        print(f"shoal: bad configuration: {e}", file=sys.stderr)
        return 2
    logs.configure(args.log_level, json=args.log_json)
    from broker.server import Server

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = Server(config)
        await server.serve_forever(stop)

    with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
        try:
            runner.run(main())
        except OSError as e:
            structlog.get_logger("shoal").error("cannot start", error=str(e))
            return 1
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shoal", description="A Kafka-protocol broker for share groups."
    )
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker in the foreground")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 9092)")
    serve.add_argument(
        "--data-dir", type=Path, help="where partition logs live (log.dirs, default ./data)"
    )
    serve.add_argument("--metrics-port", type=int, help="Prometheus port (default 9308, -1 off)")
    serve.add_argument("--config", type=Path, help="a properties file with Kafka's config names")
    serve.add_argument("--loop", choices=("uvloop", "asyncio"), help="event loop (default uvloop)")
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--log-json", action=argparse.BooleanOptionalAction, default=None)
    serve.set_defaults(func=_serve)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
