"""`shoal serve --processes N`: one supervisor, N broker processes (docs/multicore.md).

The supervisor runs no broker itself. It starts `python -m broker` N times with the same
options plus `--node-id i --processes N`, every listener and advertised listener on its
port + i (as SHOAL_LISTENERS and SHOAL_ADVERTISED_LISTENERS, which win over the file) and
metrics on metrics port + i; each child is a whole broker that leads its own partitions and
groups (`broker.ownership`). A child that exits while the supervisor is not stopping is started
again after a back-off (doubling from 0.5 s to 30 s; back to 0.5 s once a child has run for a
minute), with one log line each time. SIGTERM or SIGINT is forwarded to every child as
SIGTERM, and the supervisor waits for their clean stop (each within its
`shutdown.timeout.ms`, then SIGKILL).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from dataclasses import field
from types import FrameType

import structlog

from broker.config import BrokerConfig
from broker.config import log_config
from broker.listeners import moved
from broker.node_identity import SECRET_ENV
from broker.node_identity import new_secret
from broker.node_identity import node_mechanism
from broker.node_migration import migrate
from broker.node_tls import tls_refusal
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
    env: dict[str, str] = field(default_factory=dict)  # over the supervisor's own
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    backoff_s: float = FIRST_BACKOFF_S
    restart_at: float | None = None
    restarts: int = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(self.command, env={**os.environ, **self.env})
        self.started = time.monotonic()
        self.restart_at = None
        log.info(
            "broker process started", node_id=self.node_id, pid=self.proc.pid,
            listeners=self.env.get(LISTENERS_ENV),
        )  # fmt: skip


LISTENERS_ENV = "SHOAL_LISTENERS"
ADVERTISED_ENV = "SHOAL_ADVERTISED_LISTENERS"


@dataclass(frozen=True)
class NodeCommand:
    """How the supervisor starts node `node_id`: its command line and its own settings."""

    node_id: int
    argv: list[str]
    env: dict[str, str]


def child_commands(
    args: argparse.Namespace, config: BrokerConfig, processes: int
) -> list[NodeCommand]:
    """`python -m broker` for each node: the supervisor's own options, the node's id, every
    listener and advertised listener on its port + the id, and the metrics port + the id.

    The listeners go in the environment (as config names: they win over the file, and no
    `--host/--port` is passed to move the first one again); the rest on the command line."""
    metrics = config.metrics_port
    base = [sys.executable, "-m", "broker"]
    if args.config is not None:
        base += ["--config", str(args.config)]
    base += ["--data-dir", str(config.data_dir), "--log-level", args.log_level]
    if args.loop is not None:
        base += ["--loop", args.loop]
    if args.log_json is not None:
        base += ["--log-json" if args.log_json else "--no-log-json"]
    nodes = []
    for node in range(processes):
        env = {LISTENERS_ENV: moved(config.listeners, node)}
        if config.advertised_listeners:
            env[ADVERTISED_ENV] = moved(config.advertised_listeners, node)
        argv = [
            *base,
            "--processes",
            str(processes),
            "--node-id",
            str(node),
            "--metrics-port",
            str(metrics + node if metrics >= 0 else -1),
        ]
        nodes.append(NodeCommand(node, argv, env))
    return nodes


def check(config: BrokerConfig, processes: int) -> str | None:
    """Why N processes cannot serve this configuration, or None."""
    return port_refusal(config, processes) or inter_node_refusal(config)


def port_refusal(config: BrokerConfig, processes: int) -> str | None:
    """Node i listens on each listener's port + i and advertises each advertised port + i:
    why that cannot be (a port 0, past 65535, two listeners' ranges overlapping), or None."""
    last = processes - 1
    listeners = config.listener_list
    for lst in listeners:
        if lst.port == 0:
            return (
                f"--processes > 1 needs fixed ports: listener {lst.name} has port 0 (node i "
                "listens on each port + i, where the clients and the other nodes look for it)"
            )
        if lst.port + last > 65535:
            return f"listener {lst.name}: port {lst.port} + {last} is above 65535"
    for i, a in enumerate(listeners):
        for b in listeners[i + 1 :]:
            if abs(a.port - b.port) <= last and not _other_families(a.host, b.host):
                return (
                    f"listeners {a.name} ({a.port}-{a.port + last}) and {b.name} "
                    f"({b.port}-{b.port + last}) overlap: with --processes {processes} node i "
                    f"listens on each port + i, so space the ports at least {processes} apart"
                )
    for adv in config.advertised_list:
        if adv.port == 0 or adv.port + last > 65535:
            return (
                f"advertised listener {adv.name}: node i advertises its port + i, so the port "
                f"must lie within 1 and {65535 - last} (it is {adv.port})"
            )
    return None


def _other_families(a: str, b: str) -> bool:
    """An IPv4 and an IPv6 address: listeners on both may share ports, as Kafka allows
    (KIP-797; `listenerListToEndPoints`: one IPv4, the other IPv6, never a host name)."""
    try:
        return ipaddress.ip_address(a).version != ipaddress.ip_address(b).version
    except ValueError:  # a host name (or a wildcard spelled as one): could be either
        return False


def inter_node_refusal(config: BrokerConfig) -> str | None:
    """The processes reach each other on the inter-node listener: as a plain client on
    PLAINTEXT, over TLS with the listener's own keystore and truststore on SSL and SASL_SSL
    (`broker.node_tls`), logged in as their own user on SASL_PLAINTEXT and SASL_SSL
    (`broker.node_identity`). Why they cannot on this one, or None."""
    try:
        inter = config.inter_node_listener
    except ValueError as e:
        return str(e)
    if inter.sasl and node_mechanism(config) is None:
        # Kafka: "sasl.mechanism.inter.broker.protocol must be included in
        # sasl.enabled.mechanisms when SASL is used for inter-broker communication".
        return (
            f"the processes log in to each other on listener {inter.name} (a "
            f"{inter.security_protocol} one) with SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN, and "
            "sasl.enabled.mechanisms includes none of them: enable one"
        )
    return tls_refusal(config)


class Supervisor:
    def __init__(self, commands: list[NodeCommand], shutdown_timeout_s: float) -> None:
        # The processes log in to one another with a secret made for this run
        # (`broker.node_identity`); a restarted child gets the same.
        secret = {SECRET_ENV: new_secret()}
        self.children = [Child(c.node_id, c.argv, {**c.env, **secret}) for c in commands]
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
    refused = check(config, processes)
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
        # A change of N rewrites the nodes' own files before any of them starts.
        try:
            migrate(config.data_dir, processes, log_config(config))
        except OSError as e:
            log.error("cannot start: the nodes' files not laid out for --processes",
                      processes=processes, error=str(e))  # fmt: skip
            return 1
        commands = child_commands(args, config, processes)
        return Supervisor(commands, config.shutdown_timeout_ms / 1000).run()
    finally:
        lock.release()
