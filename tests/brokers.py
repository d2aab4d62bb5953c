"""Real brokers for tests: in the test's own event loop, or as a separate broker process.

The process launcher is the benchmark's (`bench.broker.BrokerProcess`): one way to run the
broker in a child process, for both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Set as AbstractSet
from pathlib import Path

from bench.broker import BrokerProcess
from bench.broker import free_port
from bench.broker import free_ports
from bench.broker import listens
from broker.clock import Clock
from broker.config import BrokerConfig
from broker.server import Server
from protocol.record_batch import build_batch
from storage.log_manager import LogManager

__all__ = [
    "BrokerProcess", "configured_broker", "free_port", "free_ports", "make_server", "node_pids",
    "start_broker", "wait_for_nodes",
]  # fmt: skip


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


def closed_wide_topic(data_dir: Path, topic: str, partitions: int, timestamp_ms: int) -> None:
    """A data dir holding `topic` with 1 + p % 3 records in partition p, its logs closed: a
    broker started on it opens them after it listens (`LogManager.open_pending`)."""
    logs = LogManager(data_dir)
    logs.create_topic(topic, partitions)
    for p in range(partitions):
        plog = logs.log(topic, p)
        assert plog is not None
        batch = build_batch([(None, b"v")] * (1 + p % 3), timestamp_ms=timestamp_ms)
        plog.append(batch, now_ms=timestamp_ms)
    assert logs.close()


async def count_opened_per_turn(server: Server, turns: list[int]) -> None:
    """Append to `turns` how many logs the started `server` opened in each turn of the event
    loop, until it has opened them all (run it as a task beside the requests under test)."""
    loading = server.services.logs
    before = loading.opened_at_start
    while loading.loading:
        await asyncio.sleep(0)
        turns.append(loading.opened_at_start - before)
        before = loading.opened_at_start


def node_pids(supervisor: BrokerProcess) -> dict[int, int]:
    """The broker processes of `shoal serve --processes N` under `supervisor`: node id -> pid
    (from /proc: the supervisor's children and their `--node-id`)."""
    pid = supervisor.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    nodes: dict[int, int] = {}
    for child in children:
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:  # exited meanwhile
            continue
        if b"--node-id" in argv:
            nodes[int(argv[argv.index(b"--node-id") + 1])] = int(child)
    return nodes


def wait_for_nodes(
    supervisor: BrokerProcess,
    processes: int,
    timeout: float = 60.0,
    not_pids: AbstractSet[int] = frozenset(),
) -> dict[int, int]:
    """Until each of the `processes` nodes runs (none of `not_pids`: a restarted one has a new
    pid) and listens on the supervisor's port + its id; node id -> pid."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = node_pids(supervisor)
        up = len(nodes) == processes and not set(nodes.values()) & not_pids
        if up and all(listens(supervisor.port + n) for n in nodes):
            return nodes
        assert time.monotonic() < deadline, f"not {processes} nodes up:\n{supervisor.log()}"
        time.sleep(0.1)
