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

__all__ = ["BrokerProcess", "free_port", "make_server"]


def make_server(data_dir: Path, clock: Clock | None = None, **overrides: object) -> Server:
    """A broker on an ephemeral port, not yet started (`await server.start()`)."""
    values: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "metrics.port": -1,
    }
    values.update(overrides)
    return Server(BrokerConfig.load(environ={}, overrides=values), clock)
