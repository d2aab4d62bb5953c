"""The broker's one timer over its connections: idle ones, and those over max.connections.

- `connections.max.idle.ms` (default 10 minutes), as Kafka's Selector applies it
  (`maybeCloseOldestConnection`): a connection idle that long is closed. Kafka counts from a
  channel's last I/O, so its muted channels (a request pending) age too; Shoal never counts a
  request in flight as idleness (`KafkaConnection.idle_for`): a long poll or a group join is
  the broker's wait, and the client must not lose its connection for it. A client that stops
  reading its answers does not count as active either: it is closed when idle that long.
- `max.connections` lowered at runtime: the least recently active connections over it are
  closed, as Kafka's `Processor.closeExcessConnections` closes its least recently used ones.

A request costs one timestamp store (in `data_received`); the sweep does the rest. Each run
looks at SCAN_BUDGET connections at most and closes CLOSE_BUDGET at most, so that thousands
of connections expiring together never hold the loop (Kafka closes one per poll); while a
pass is unfinished the next run comes SWEEP_MIN_MS later.
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Collection
from typing import Protocol

import structlog

from broker.config import BrokerConfig
from broker.connection_quotas import ConnectionQuotas

log = structlog.get_logger("shoal.connections")

SWEEP_MAX_MS = 1000  # an idle connection is closed at most this late (sooner for short limits)
SWEEP_MIN_MS = 10
SCAN_BUDGET = 2000  # connections looked at by one run (~1 ms)
CLOSE_BUDGET = 250  # connections closed by one run (their connection_lost runs next turn)
PEERS_LOGGED = 5  # peers named in one log line; the count covers them all


class Swept(Protocol):
    """What the sweep needs of a connection (`broker.connection.KafkaConnection`)."""

    last_active: float  # monotonic seconds

    @property
    def closing(self) -> bool: ...

    @property
    def listener_name(self) -> str: ...

    @property
    def peer(self) -> str: ...

    def idle_for(self, now: float) -> float: ...

    def expire(self) -> None: ...


def sweep_interval_ms(config: BrokerConfig) -> int:
    idle_ms = config.connections_max_idle_ms
    return SWEEP_MAX_MS if idle_ms < 0 else max(SWEEP_MIN_MS, min(SWEEP_MAX_MS, idle_ms // 4))


class ConnectionSweep:
    def __init__(
        self,
        connections: Collection[Swept],
        quotas: ConnectionQuotas,
        config: Callable[[], BrokerConfig],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connections = connections
        self._quotas = quotas
        self._config = config
        self._monotonic = monotonic
        self._pass: list[Swept] = []  # still to look at in this pass over them all

    def interval_ms(self) -> int:
        """Until the next run: soon while a pass or the closing is unfinished."""
        behind = self._pass or self._quotas.excess()
        return SWEEP_MIN_MS if behind else sweep_interval_ms(self._config())

    def run(self) -> None:
        now = self._monotonic()
        max_idle_ms = self._config().connections_max_idle_ms
        if max_idle_ms >= 0:
            self._close_idle(now, max_idle_ms)
        else:
            self._pass.clear()
        excess = self._quotas.excess()
        if excess:
            self._close_excess(excess)

    def _close_idle(self, now: float, max_idle_ms: int) -> None:
        if not self._pass:
            self._pass = list(self._connections)
        limit_s = max_idle_ms / 1000
        idle: list[Swept] = []
        for _ in range(min(SCAN_BUDGET, len(self._pass))):
            conn = self._pass.pop()
            if not conn.closing and conn.idle_for(now) > limit_s:
                idle.append(conn)
                if len(idle) == CLOSE_BUDGET:
                    break
        if idle:
            self._close(idle, "connections.max.idle.ms", limit=max_idle_ms)

    def _close_excess(self, excess: int) -> None:
        open_ = [c for c in list(self._connections) if not c.closing]
        # Those already closing (not yet lost) are on their way out: count them.
        excess = min(excess - (len(self._connections) - len(open_)), CLOSE_BUDGET)
        if excess > 0:
            lru = heapq.nsmallest(excess, open_, key=lambda c: c.last_active)
            self._close(lru, "max.connections", limit=self._quotas.max_connections)

    def _close(self, connections: list[Swept], reason: str, limit: int) -> None:
        """Close `connections`; one log line per listener, naming the limit and the count."""
        by_listener: defaultdict[str, list[Swept]] = defaultdict(list)
        for conn in connections:
            by_listener[conn.listener_name].append(conn)
        for listener, closing in by_listener.items():
            counts = self._quotas.listener(listener)
            if reason == "max.connections":
                counts.closed_excess += len(closing)
            else:
                counts.closed_idle += len(closing)
            log.info(
                f"connections closed: {reason}", listener=listener, closed=len(closing),
                limit=limit, connections=self._quotas.total,
                peers=[c.peer for c in closing[:PEERS_LOGGED]],
            )  # fmt: skip
            for conn in closing:
                conn.expire()
