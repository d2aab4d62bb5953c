"""The broker's one timer over its connections: idle ones, and those over max.connections.

- `connections.max.idle.ms` (default 10 minutes), as Kafka's Selector applies it
  (`maybeCloseOldestConnection`): a connection idle that long is closed. Kafka counts from a
  channel's last I/O, so its muted channels (a request pending) age too; Shoal never counts a
  request in flight as idleness (`KafkaConnection.idle_for`): a long poll or a group join is
  the broker's wait, and the client must not lose its connection for it. A client that stops
  reading its answers does not count as active either: it is closed when idle that long.
- `max.connections` lowered at runtime: the least recently active connections over it are
  closed, as Kafka's `Processor.closeExcessConnections` closes its least recently used ones.

A request costs one timestamp store (in `data_received`); the sweep does the rest, every
`interval_ms`, walking the connections (about 0.3 ms per 1,000).
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Collection

import structlog

from broker.config import BrokerConfig
from broker.connection import KafkaConnection
from broker.connection_quotas import ConnectionQuotas

log = structlog.get_logger("shoal.connections")

SWEEP_MAX_MS = 1000  # an idle connection is closed at most this late (sooner for short limits)
SWEEP_MIN_MS = 10
PEERS_LOGGED = 5  # peers named in one log line; the count covers them all


def sweep_interval_ms(config: BrokerConfig) -> int:
    idle_ms = config.connections_max_idle_ms
    return SWEEP_MAX_MS if idle_ms < 0 else max(SWEEP_MIN_MS, min(SWEEP_MAX_MS, idle_ms // 4))


class ConnectionSweep:
    def __init__(
        self,
        connections: Collection[KafkaConnection],
        quotas: ConnectionQuotas,
        config: Callable[[], BrokerConfig],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connections = connections
        self._quotas = quotas
        self._config = config
        self._monotonic = monotonic

    def run(self) -> None:
        now = self._monotonic()
        max_idle_ms = self._config().connections_max_idle_ms
        if max_idle_ms >= 0:
            limit_s = max_idle_ms / 1000
            idle = [
                c for c in list(self._connections) if not c.closing and c.idle_for(now) > limit_s
            ]
            if idle:
                self._close(idle, "connections.max.idle.ms", limit=max_idle_ms)
        excess = self._quotas.excess()
        if excess:
            open_ = [c for c in list(self._connections) if not c.closing]
            # Those already closing (not yet lost) are on their way out: count them.
            excess -= len(self._connections) - len(open_)
            if excess > 0:
                lru = heapq.nsmallest(excess, open_, key=lambda c: c.last_active)
                self._close(lru, "max.connections", limit=self._quotas.max_connections)

    def _close(self, connections: list[KafkaConnection], reason: str, limit: int) -> None:
        """Close `connections`; one log line per listener, naming the limit and the count."""
        by_listener: defaultdict[str, list[KafkaConnection]] = defaultdict(list)
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
