"""Requests from this process to the other processes of `shoal serve --processes N`.

A transaction's coordinator and its partitions' leaders may be different processes
(docs/multicore.md): a leader asks the coordinator to verify a transactional batch
(AddPartitionsToTxn `verify_only`, KIP-890) and the coordinator asks the leaders to write its
markers (WriteTxnMarkers), as Kafka's brokers do over their inter-broker connections
(`AddPartitionsToTxnManager`, `TransactionMarkerChannelManager`). One connection per node,
opened at the first request and kept: requests share it (the client pipelines them and matches
the answers in order), so a produce pays no connection set-up. A connection that failed or
timed out is closed and the next request opens another.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from kio.static.protocol import RequestPayload

from broker.ownership import Ownership
from client.connection import Connection
from client.security import Security

log = structlog.get_logger("shoal.node_link")

WILDCARDS = ("", "0.0.0.0", "::")
# Kafka's inter-broker `request.timeout.ms` is 30 s; a produce waiting on a verification holds
# its client that long, so a shorter bound: a coordinator that does not answer in it is down.
REQUEST_TIMEOUT_S = 10.0
NODE_CLIENT_PREFIX = "shoal-node-"  # the client id of these requests (`shoal-node-<id>`)


class NodeLinks:
    """A kept connection to each other node, reused by every request to it."""

    def __init__(
        self, ownership: Ownership, listener: tuple[str, int], security: Security | None = None
    ) -> None:
        """`security`: how to log in to the others (`broker.node_identity`); None: no SASL."""
        self._owner = ownership
        self.security = security
        host, self._port = listener
        self._host = "127.0.0.1" if host in WILDCARDS else host
        self._connections: dict[int, Connection] = {}
        self._opening: dict[int, asyncio.Lock] = {}
        self.opened = 0  # connections opened so far (one per node while they last)

    @property
    def node_id(self) -> int:
        return self._owner.node_id

    def address(self, node: int) -> tuple[str, int]:
        return self._host, self._owner.port_of(node, self._port)

    async def _connection(self, node: int) -> Connection:
        conn = self._connections.get(node)
        if conn is not None and not conn.closed:
            return conn
        lock = self._opening.setdefault(node, asyncio.Lock())
        async with lock:  # one opening at a time: the requests waiting on it share it
            conn = self._connections.get(node)
            if conn is None or conn.closed:
                host, port = self.address(node)
                conn = await Connection.open(
                    host, port, f"{NODE_CLIENT_PREFIX}{self.node_id}", self.security
                )
                self._connections[node] = conn
                self.opened += 1
            return conn

    async def request(
        self, node: int, body: RequestPayload, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> Any:
        """`node`'s answer to `body`.

        :raises OSError: not reachable, or the connection failed (ConnectionError).
        :raises TimeoutError: no answer in `timeout_s` (the connection is closed).
        """
        try:  # wait_for, not asyncio.timeout: a handler's first step runs in no task
            return await asyncio.wait_for(self._ask(node, body), timeout_s)
        except (OSError, TimeoutError):
            await self._drop(node)
            raise

    async def _ask(self, node: int, body: RequestPayload) -> Any:
        conn = await self._connection(node)
        return await conn.request(body)

    async def _drop(self, node: int) -> None:
        conn = self._connections.pop(node, None)
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        for node in list(self._connections):
            await self._drop(node)
