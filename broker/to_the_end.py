"""Changes that run to their end whether or not the request that asked still waits.

A request's task is cancelled when its connection is lost. A change made in steps around an
await (write the file in a thread, then put the new state in force) would stop between them:
the file changed, memory not, until a restart; and a lock released by the cancelled request
lets the next change plan from the old state and write over the first. So a change whose
steps must all happen runs here, in a task of its own, as a Kafka controller finishes a
change whatever happened to the client's connection. Each server has its own `Changes`
(`BrokerServices.changes`): its stop waits for them, not for another server's in the process.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from collections.abc import Generator
from typing import Any
from typing import TypeVar
from typing import cast

import structlog

T = TypeVar("T")
log = structlog.get_logger("shoal.changes")


class Changes:
    """One server's changes running to their end: its stop waits for these and no other
    server's (several in-process servers share a loop in tests)."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()  # strong references: the loop's are weak

    async def to_the_end(self, change: Coroutine[Any, Any, T]) -> T:
        """Run `change` to its end whether or not the caller is cancelled meanwhile; its
        outcome, if the caller is still there. Its first step runs here, at once: a change
        that never waits (a small ShareAcknowledge) costs no task and no loop turn. One that
        waits goes on from there in a task of its own that a cancelled caller does not stop
        (in a copy of the caller's context: its log lines say who asked)."""
        try:
            waiting_on = change.send(None)
        except StopIteration as done:
            return cast(T, done.value)
        task = asyncio.get_running_loop().create_task(
            _Rest(change, waiting_on), context=contextvars.copy_context()
        )
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_said_if_failed)  # no one is left to be answered its error
            raise

    async def drain(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the changes under way (a stopping broker: before its
        logs close, within its shutdown timeout); those still running then are left to the
        loop's end."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=max(timeout_s, 0.0))


def _said_if_failed(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("a change whose client had gone failed", error=repr(error))


class _Rest(Coroutine[Any, Any, T]):
    """A change already run to its first wait, and what that step yielded (the future it
    waits on, or None for a bare yield): its Task's first send hands that over, as the change
    would have yielded it to the Task itself (as `broker.handler_drive`'s resumed requests)."""

    __slots__ = ("_coro", "_first", "_started")

    def __init__(self, coro: Coroutine[Any, Any, T], first: Any) -> None:
        self._coro = coro
        self._first: Any = first
        self._started = False

    def send(self, value: Any) -> Any:
        if not self._started:
            self._started = True
            first, self._first = self._first, None
            return first
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        self._started = True
        self._first = None
        return self._coro.throw(*args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        raise TypeError("a change's rest is driven by its Task, never awaited")
