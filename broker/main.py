"""The broker's entry point: `python -m broker [options]`, and `shoal serve [options]`.

`--host H --port P --data-dir D --metrics-port M [--config FILE]` is relied on by outside
tooling (the container's CMD, scripts): keep those options stable. The `shoal` command
(`cli/`) reaches the broker only through `add_arguments` and `serve` here.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from broker import logs
from broker.loops import loop_factory

if TYPE_CHECKING:
    from broker.config import BrokerConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `serve`, for `python -m broker` and `shoal serve` alike."""
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default 9092)")
    p.add_argument(
        "--data-dir", type=Path, help="where partition logs live (log.dirs, default ./data)"
    )
    p.add_argument("--metrics-port", type=int, help="Prometheus port (default 9308, -1 off)")
    p.add_argument("--config", type=Path, help="a properties file with Kafka's config names")
    p.add_argument("--loop", choices=("uvloop", "asyncio"), help="event loop (default uvloop)")
    p.add_argument("--log-level", default="info")
    p.add_argument("--log-json", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument(
        "--processes", type=int, default=1,
        help="broker processes on this host, one per core (default 1; docs/multicore.md)",
    )  # fmt: skip
    p.add_argument(
        "--node-id", type=int, help="node.id; with --processes N, one of its N processes"
    )


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """Command-line options as config overrides (they win over the file and the environment)."""
    overrides: dict[str, object] = {}
    if args.data_dir is not None:
        overrides["log.dirs"] = str(args.data_dir)
    if args.metrics_port is not None:
        overrides["metrics.port"] = args.metrics_port
    if args.node_id is not None:
        overrides["node.id"] = args.node_id
    # One of N processes only as the supervisor starts it (with its --node-id): a `processes`
    # in the file or the environment never makes a lone broker think it has peers.
    overrides["processes"] = args.processes if args.node_id is not None else 1
    return overrides


def first_listener_at(listeners: str, host: str, port: int) -> str:
    """`--host/--port` move the first listener (PLAINTEXT by default) and keep its name; the
    other listeners (`SASL_SSL://...` from the config file) stay as configured."""
    first, *rest = [item.strip() for item in listeners.split(",") if item.strip()]
    name, sep, _ = first.partition("://")
    return ",".join([f"{name if sep else 'PLAINTEXT'}://{host}:{port}", *rest])


def _load(args: argparse.Namespace) -> BrokerConfig:
    """:raises OSError, ValueError: an unreadable file, a bad value."""
    from broker.config import BrokerConfig

    config = BrokerConfig.load(file=args.config, overrides=_overrides(args))
    if args.host is not None or args.port is not None:
        host = args.host or "127.0.0.1"
        port = args.port if args.port is not None else 9092
        listeners = first_listener_at(config.listeners, host, port)
        config = config.replace({"listeners": listeners})
    return config


def serve(args: argparse.Namespace) -> int:
    """Run the broker in the foreground until SIGTERM or SIGINT; the exit code."""
    # Imported here, not at the top: every `shoal` command builds this module's parser, and
    # only `serve` should pay for loading the broker (config pulls in storage, coordinator).
    from broker.server import Server

    try:
        config = _load(args)
    except (OSError, ValueError) as e:
        print(f"shoal: bad configuration: {e}", file=sys.stderr)
        return 2
    several = args.processes > 1
    if args.processes < 1 or (
        several and args.node_id is not None and args.node_id >= args.processes
    ):
        print("shoal: bad configuration: --processes N >= 1, --node-id below N", file=sys.stderr)
        return 2
    if args.processes > 1 and args.node_id is None:  # the supervisor of N processes
        from broker.supervisor import supervise

        logs.configure(args.log_level, json=args.log_json)
        return supervise(args, config, args.processes)
    logs.configure(
        args.log_level,
        json=args.log_json,
        node_id=config.ownership.node_id if config.processes > 1 else None,
    )

    if config.processes == 1 and not _lay_out_for_one(config):
        return 1

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await Server(config).serve_forever(stop)

    with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
        try:
            runner.run(run())
        except OSError as e:
            structlog.get_logger("shoal").error("cannot start", error=str(e))
            return 1
    return 0


def _lay_out_for_one(config: BrokerConfig) -> bool:
    """One process on a data dir that N > 1 processes served: their own files rewritten for
    it first (`broker.node_migration`), under the data dir's lock. Whether it may start."""
    from broker.config import log_config
    from broker.node_migration import migrate
    from storage.dir_lock import DataDirLock

    try:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        lock = DataDirLock(config.data_dir)
        try:
            migrate(config.data_dir, 1, log_config(config), config.ownership.node_id)
        finally:
            lock.release()
    except OSError as e:
        structlog.get_logger("shoal").error("cannot start", error=str(e))
        return False
    return True


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m broker", description="Run the Shoal broker in the foreground."
    )
    add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    return serve(parser().parse_args(argv))
