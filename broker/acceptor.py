"""One listener's accept loop, as Kafka's Acceptor (SocketServer.scala) runs it.

asyncio's `create_server` accepts whatever arrives; Kafka's acceptor instead waits for a slot
under `max.connections` before it accepts again, leaving later clients in the listen backlog
(`socket.listen.backlog.size`). So Shoal binds its listening sockets itself and accepts with
`sock_accept`, asking `ConnectionQuotas` first for a slot (waiting while there is none) and
then for the client address's own limit (`max.connections.per.ip`: over it, the connection is
closed at once, with one log line, rate-limited). An admitted socket becomes a
`KafkaConnection` through `connect_accepted_socket` (the TLS handshake for SSL listeners); its
slot goes back when the connection is lost, or at once if the handshake fails.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable
from collections.abc import Coroutine
from typing import Any

import structlog

from broker.config import parse_ip_overrides
from broker.connection_quotas import ConnectionQuotas
from broker.connection_quotas import ConnectionSlot
from broker.listeners import Listener

log = structlog.get_logger("shoal.acceptor")

# After an accept fails for want of file descriptors (EMFILE), as asyncio's own server waits.
ACCEPT_RETRY_S = 1.0
# Accepts in a row before the loop gets a turn: an accept that needs no wait does not yield,
# and a flood of connections must not keep other clients waiting.
ACCEPTS_PER_TURN = 32


class LogThrottle:
    """At most one line per `interval_s`: a flood of refusals writes one line a second, and
    that line counts those held back since the last."""

    def __init__(self, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._interval_s = interval_s
        self._clock = clock
        self._next = 0.0
        self._held = 0

    def admit(self) -> int | None:
        """The number of lines held back since the last one, if a line may be written now;
        else None (and this one is held back)."""
        now = self._clock()
        if now < self._next:
            self._held += 1
            return None
        self._next = now + self._interval_s
        held, self._held = self._held, 0
        return held


async def open_listening_sockets(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address `host` names (as asyncio's
    create_server binds them: SO_REUSEADDR, IPv6 sockets IPv6 only).

    :raises OSError: an address cannot be bound (in use, not local).
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(
        host, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as e:
                raise OSError(
                    e.errno, f"error while attempting to bind on address {address!r}: {e.strerror}"
                ) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def resolve_ip_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides by address: a host name counts for each address it
    resolves to (looked up off the loop); one that does not resolve is logged and left out."""
    loop = asyncio.get_running_loop()
    resolved: dict[str, int] = {}
    for host, count in parse_ip_overrides(text).items():
        try:
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            log.warning("max.connections.per.ip.overrides: host not resolved, its limit is "
                        "not applied", host=host, error=str(e))  # fmt: skip
            continue
        resolved.update((str(info[4][0]), count) for info in infos)
    return resolved


class Acceptor:
    def __init__(
        self,
        listener: Listener,
        sockets: list[socket.socket],
        quotas: ConnectionQuotas,
        connection: Callable[[ConnectionSlot], asyncio.Protocol],
        tls: ssl.SSLContext | None,
    ) -> None:
        """`connection`: makes the protocol of an admitted connection, which releases the slot
        when the connection is lost."""
        self._listener = listener
        self.sockets = sockets
        self._quotas = quotas
        self._counts = quotas.listener(listener.name)
        self._connection = connection
        self._tls = tls
        self._slot_freed = asyncio.Event()
        quotas.on_slot(self._slot_freed.set)
        self._tasks: set[asyncio.Task[None]] = set()
        self._refusals = LogThrottle()
        self._blocked = LogThrottle()

    def start(self) -> None:
        for sock in self.sockets:
            self._spawn(self._accept_loop(sock))

    async def close(self) -> None:
        """Stop accepting: the listening sockets close (once no accept waits on them), and so
        do connections still in their TLS handshake (their slots go back)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in self.sockets:
            sock.close()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        accepted = 0
        while True:
            if not self._quotas.slot_available():
                await self._wait_for_slot()
            accepted += 1
            if accepted % ACCEPTS_PER_TURN == 0:
                await asyncio.sleep(0)
            try:
                conn, address = await loop.sock_accept(sock)
            except (ConnectionAbortedError, InterruptedError):
                continue  # the client gave up before it was accepted
            except OSError as e:  # out of file descriptors, most likely: let some close
                log.error("accept failed", listener=self._listener.name, error=str(e))
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            self._admit(conn, address[0])

    async def _wait_for_slot(self) -> None:
        """max.connections is reached: accept nothing until a connection closes (or the limit
        is raised), as Kafka's acceptor blocks; the time waited is AcceptorBlockedPercent's."""
        held = self._blocked.admit()
        if held is not None:
            log.warning(
                "max.connections reached: not accepting until a connection closes",
                listener=self._listener.name, connections=self._quotas.total,
                max_connections=self._quotas.max_connections, times_since_last_line=held,
            )  # fmt: skip
        started = time.monotonic()
        try:
            while not self._quotas.slot_available():
                self._slot_freed.clear()
                await self._slot_freed.wait()
        finally:
            self._counts.blocked_s += time.monotonic() - started

    def _admit(self, conn: socket.socket, ip: str) -> None:
        slot = self._quotas.admit(self._listener.name, ip)
        if slot is None:
            held = self._refusals.admit()
            if held is not None:
                log.warning(
                    "connection refused: max.connections.per.ip", listener=self._listener.name,
                    ip=ip, connections=self._quotas.connections_from(ip),
                    max_connections_per_ip=self._quotas.limit_for(ip),
                    refused_since_last_line=held,
                )  # fmt: skip
            conn.close()
            return
        self._spawn(self._serve(conn, slot))

    async def _serve(self, conn: socket.socket, slot: ConnectionSlot) -> None:
        """The connection's transport and protocol (after the TLS handshake, on SSL listeners)."""
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(lambda: self._connection(slot), conn, ssl=self._tls)
        except BaseException as e:  # a failed handshake, or the broker stopping
            slot.release()
            conn.close()
            if not isinstance(e, Exception):
                raise
            # A failed handshake is the client's doing: debug, as asyncio's server logs it.
            log.debug("connection closed before it was served", listener=self._listener.name,
                      ip=slot.ip, error=repr(e))  # fmt: skip
