"""`shoal serve --processes N`: one supervisor, N broker processes (docs/multicore.md).

The supervisor runs no broker itself. It starts `python -m broker` N times with the same
options plus `--node-id i --processes N`, the first listener on port + i and metrics on
metrics port + i; each child is a whole broker that leads its own partitions and groups
(`broker.ownership`). A child that exits while the supervisor is not stopping is started
again after a back-off (doubling from 0.5 s to 30 s; back to 0.5 s once a child has run for a
minute), with one log line each time. SIGTERM or SIGINT is forwarded to every child as
SIGTERM, and the supervisor waits for their clean stop (each within its
`shutdown.timeout.ms`, then SIGKILL).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType

import structlog

from broker.config import BrokerConfig
from broker.node_identity import SECRET_ENV
from broker.node_identity import new_secret
from storage.dir_lock import DataDirLock

log = structlog.get_logger("shoal.supervisor")

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
STEADY_S = 60.0  # a child that ran this long starts again after the first back-off
POLL_S = 0.1
KILL_MARGIN_S = 5.0  # beyond the children's own shutdown.timeout.ms


@dataclass
class Child:
    node_id: int
    command: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    backoff_s: float = FIRST_BACKOFF_S
    restart_at: float | None = None
    restarts: int = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command, env=self.env)
        self.started = time.monotonic()
        self.restart_at = None
        log.info("broker process started", node_id=self.node_id, pid=self.proc.pid)


def child_commands(
    args: argparse.Namespace, config: BrokerConfig, processes: int
) -> list[list[str]]:
    """`python -m broker` for each node: the supervisor's own options, the node's id, its
    first listener's port and its metrics port moved by the id."""
    host, port = config.listener
    metrics = config.metrics_port
    base = [sys.executable, "-m", "broker", "--host", host]
    if args.config is not None:
        base += ["--config", str(args.config)]
    base += ["--data-dir", str(config.data_dir), "--log-level", args.log_level]
    if args.loop is not None:
        base += ["--loop", args.loop]
    if args.log_json is not None:
        base += ["--log-json" if args.log_json else "--no-log-json"]
    return [
        [
            *base,
            "--port",
            str(port + node),
            "--processes",
            str(processes),
            "--node-id",
            str(node),
            "--metrics-port",
            str(metrics + node if metrics >= 0 else -1),
        ]
        for node in range(processes)
    ]


def check(config: BrokerConfig) -> str | None:
    """Why N processes cannot serve this configuration, or None."""
    if len(config.listener_list) > 1:
        return "--processes > 1 serves one listener only (listeners names several)"
    if config.advertised_listeners:
        return "--processes > 1 advertises each node's own port: unset advertised.listeners"
    if config.listener[1] == 0:
        return "--processes > 1 needs a fixed port (each node listens on port + its id)"
    return None


class Supervisor:
    def __init__(self, commands: list[list[str]], shutdown_timeout_s: float) -> None:
        # The processes log in to one another with a secret made for this run
        # (`broker.node_identity`); a restarted child gets the same.
        env = {**os.environ, SECRET_ENV: new_secret()}
        self.children = [Child(node, command, env) for node, command in enumerate(commands)]
        self._stop = threading.Event()
        self._shutdown_timeout_s = shutdown_timeout_s

    def _signalled(self, signum: int, frame: FrameType | None) -> None:
        self._stop.set()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._signalled)
        for child in self.children:
            child.start()
        while not self._stop.wait(POLL_S):
            now = time.monotonic()
            for child in self.children:
                self._watch(child, now)
        return self._stop_all()

    def _watch(self, child: Child, now: float) -> None:
        proc = child.proc
        if child.restart_at is not None:
            if now >= child.restart_at:
                child.restarts += 1
                child.start()
            return
        if proc is None or proc.poll() is None:
            return
        ran = now - child.started
        if ran >= STEADY_S:
            child.backoff_s = FIRST_BACKOFF_S
        child.restart_at = now + child.backoff_s
        log.error(
            "broker process exited; starting it again", node_id=child.node_id,
            pid=proc.pid, returncode=proc.returncode, ran_s=round(ran, 3),
            restart_in_s=child.backoff_s,
        )  # fmt: skip
        child.backoff_s = min(MAX_BACKOFF_S, child.backoff_s * 2)

    def _stop_all(self) -> int:
        """SIGTERM to each running child, then wait; SIGKILL what outlives its budget."""
        log.info("stopping broker processes", processes=len(self.children))
        running = [c.proc for c in self.children if c.proc is not None and c.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self._shutdown_timeout_s + KILL_MARGIN_S
        code = 0
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("broker process did not stop in time; killed", pid=proc.pid)
                proc.kill()
                proc.wait()
                code = 1
            if proc.returncode not in (0, None):
                code = 1
        log.info("stopped")
        return code


def supervise(args: argparse.Namespace, config: BrokerConfig, processes: int) -> int:
    """Run N broker processes until SIGTERM or SIGINT; the exit code."""
    refused = check(config)
    if refused is not None:
        print(f"shoal: bad configuration: {refused}", file=sys.stderr)
        return 2
    from broker.wiring import cluster_id

    config.data_dir.mkdir(parents=True, exist_ok=True)
    # The data dir's own lock is the supervisor's: a second `shoal serve` on it refuses to
    # start, and offline tools see it in use. Each process locks its own `__nodes/<id>`.
    try:
        lock = DataDirLock(config.data_dir)
    except OSError as e:
        print(f"shoal: {e}", file=sys.stderr)
        return 1
    try:
        cluster_id(config.data_dir)  # made here, before any process reads it: one writer
        commands = child_commands(args, config, processes)
        return Supervisor(commands, config.shutdown_timeout_ms / 1000).run()
    finally:
        lock.release()
