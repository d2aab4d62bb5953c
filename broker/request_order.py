"""Requests on one connection take effect in the order they were sent.

A connection runs each request's handler as soon as the request before it has taken effect,
and no sooner: while a handler is still taking effect (decoded in a thread, running in slices,
awaiting a write), no later request of that connection starts. Kafka handles one request per
connection at a time, and clients rely on the order: a producer's pipelined Produce requests
must be appended in the order sent.

A handler whose effect is complete and that now only waits on other clients or on time (a long
poll, a group join, the fsync of what it appended) calls `release_order()` before it waits, so
that the connection's later requests are not held behind the wait.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class OrderedConnection(Protocol):
    def release_order(self, seq: int) -> None:
        """Let the requests after `seq` start, if `seq` is the one holding them back."""


# The connection and sequence number of the request running in this context.
ORDER: ContextVar[tuple[OrderedConnection, int] | None] = ContextVar("ORDER", default=None)


def release_order() -> None:
    """The running request has taken effect: later requests on its connection may start.

    Idempotent, and a no-op outside a request (unit tests calling a service directly)."""
    held = ORDER.get()
    if held is not None:
        connection, seq = held
        connection.release_order(seq)
