"""How many connections the broker holds: Kafka's ConnectionQuotas (SocketServer.scala).

- `max.connections` (KIP-402) counts every connection of every listener. When it is reached,
  the listeners stop accepting (`ConnectionQuotas.waitForConnectionSlot`): later clients wait
  in the kernel's listen backlog and are served once a connection closes. Nothing is refused.
  Lowered at runtime, the least recently active connections over it are closed, one sweep at a
  time (Kafka's `Processor.closeExcessConnections`).
- `max.connections.per.ip`, and `max.connections.per.ip.overrides` per address: a connection
  from an address that already holds its limit is accepted and closed at once
  (`TooManyConnectionsException`); the others from that address are untouched.

Sans-IO: the acceptor (`broker.acceptor`) asks for a slot after each accept and waits while
`slot_available` is false; `ConnectionSlot.release` (when the connection is lost) gives the
slot back and wakes it. Counts per listener are kept for the metrics, read at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass

from broker.config import BrokerConfig


@dataclass(slots=True)
class ListenerConnections:
    """One listener's connections: open now, and counts since start (its metrics)."""

    open: int = 0
    created: int = 0  # admitted: counted against the limits until closed
    closed: int = 0
    refused_per_ip: int = 0  # over max.connections.per.ip(.overrides): closed once accepted
    closed_idle: int = 0  # connections.max.idle.ms
    closed_excess: int = 0  # over a lowered max.connections
    blocked_s: float = 0.0  # time its acceptor waited for a slot under max.connections


class ConnectionSlot:
    """One admitted connection's place in the counts; releasing it twice is harmless (the
    accept path and the connection may both see it end)."""

    __slots__ = ("_held", "_quotas", "ip", "listener")

    def __init__(self, quotas: ConnectionQuotas, listener: str, ip: str) -> None:
        self._quotas = quotas
        self.listener = listener
        self.ip = ip
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._quotas.release(self)


class ConnectionQuotas:
    def __init__(self, config: Callable[[], BrokerConfig]) -> None:
        """`config`: the settings in force, read afresh (the limits are dynamic)."""
        self._config = config
        self._per_ip: dict[str, int] = {}
        self.total = 0
        self.listeners: dict[str, ListenerConnections] = {}
        # max.connections.per.ip.overrides by address (host names resolved by the server).
        self.ip_overrides: Mapping[str, int] = {}
        self._slot_listeners: list[Callable[[], None]] = []

    def listener(self, name: str) -> ListenerConnections:
        counts = self.listeners.get(name)
        if counts is None:
            counts = self.listeners[name] = ListenerConnections()
        return counts

    @property
    def max_connections(self) -> int:
        return self._config().max_connections

    def slot_available(self) -> bool:
        """May a listener accept one more connection (max.connections)?"""
        return self.total < self._config().max_connections

    def excess(self) -> int:
        """Connections over max.connections (after it was lowered)."""
        return max(0, self.total - self._config().max_connections)

    def limit_for(self, ip: str) -> int:
        return self.ip_overrides.get(ip, self._config().max_connections_per_ip)

    def connections_from(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    def admit(self, listener: str, ip: str) -> ConnectionSlot | None:
        """Count a connection just accepted on `listener` from `ip`; None when that address
        already holds its limit (the connection is then closed, and not counted)."""
        counts = self.listener(listener)
        held = self._per_ip.get(ip, 0)
        if held >= self.limit_for(ip):
            counts.refused_per_ip += 1
            return None
        self._per_ip[ip] = held + 1
        self.total += 1
        counts.open += 1
        counts.created += 1
        return ConnectionSlot(self, listener, ip)

    def release(self, slot: ConnectionSlot) -> None:
        """`slot.release()`: the connection is gone."""
        held = self._per_ip.get(slot.ip, 0)
        if held <= 1:
            self._per_ip.pop(slot.ip, None)
        else:
            self._per_ip[slot.ip] = held - 1
        self.total -= 1
        counts = self.listener(slot.listener)
        counts.open -= 1
        counts.closed += 1
        self.limits_changed()

    def on_slot(self, listener: Callable[[], None]) -> None:
        """Call `listener` whenever a slot may have become free (an acceptor waiting on one)."""
        self._slot_listeners.append(listener)

    def limits_changed(self) -> None:
        """A connection closed, or the limits changed: waiting acceptors look again."""
        if self._slot_listeners and self.slot_available():
            for listener in self._slot_listeners:
                listener()
