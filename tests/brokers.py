"""Real brokers for tests: in the test's own event loop, or as a separate broker process.

The process launcher is the benchmark's (`bench.broker.BrokerProcess`): one way to run the
broker in a child process, for both.
"""

from __future__ import annotations

from pathlib import Path

from bench.broker import BrokerProcess
from bench.broker import free_port
from broker.clock import Clock
from broker.config import BrokerConfig
from broker.server import Server

__all__ = ["BrokerProcess", "configured_broker", "free_port", "make_server", "start_broker"]


def make_server(data_dir: Path, clock: Clock | None = None, **overrides: object) -> Server:
    """A broker on an ephemeral port, not yet started (`await server.start()`)."""
    values: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "metrics.port": -1,
    }
    values.update(overrides)
    return Server(BrokerConfig.load(environ={}, overrides=values), clock)


def configured_broker(data_dir: Path, config: dict[str, object] | None = None) -> BrokerProcess:
    """`shoal serve` in a child process, not started yet, with a properties file made from
    `config` (broker properties; none: the defaults)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    extra: list[str] = []
    if config:
        props = data_dir.parent / f"{data_dir.name}.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        extra = ["--config", str(props)]
    return BrokerProcess(data_dir, extra=extra)


def start_broker(data_dir: Path, config: dict[str, object] | None = None) -> BrokerProcess:
    """`configured_broker`, started."""
    proc = configured_broker(data_dir, config)
    proc.start()
    return proc
