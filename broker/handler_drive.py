"""A request's coroutine run to its first wait at once, with no task: `drive`.

Most handlers (Produce, ShareAcknowledge, heartbeats) never wait, so a connection runs each
one's first step as the request is dispatched: it answers within the read that brought it, and
the answers of one read share one write (`broker.connection`). Only a coroutine that waits
goes on in a Task, from where it stopped.

What it buys, measured (Nov 28 2026, `python -m bench --only small --repeat 1` with the Redis
peer left out, 3 alternated rounds each, load 11-12 on the 2 shared cores): against a Task per
request (the handler run by `create_task` and answered from it), the produce and the 4
ShareConsumers at once ("live") took 33.8-46.4 µs of broker CPU per record here, 364-393 µs
with a Task per request: there the producer's requests each waited a loop turn behind the
consumers' and their answers went out one write each, the producer fell from ~10,000 to ~2,000
records/s, the consumers took one record per ShareFetch, and the broker saturated its core.
Alone, one-record produce was within the noise (29.8-37.2 against 34.4-40.0 µs/record), and
so was the share consume (14.8-19.4 against 13.8-14.6). Figures and commands in
`bench/PROFILE.md`.

The callbacks are the caller's: `answer(*args, value)` once the coroutine returns, `failed(*args)`
if it raises (called inside the `except`, so a log line there carries the traceback), on this
step or in the Task. Cancelling the Task reaches the coroutine's await as it would a plain
coroutine's, even before the Task's first step.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from collections.abc import Coroutine
from collections.abc import Generator
from typing import Any


def drive(
    coro: Coroutine[Any, Any, Any],
    answer: Callable[..., None],
    failed: Callable[..., None],
    args: tuple[Any, ...],
) -> asyncio.Task[None] | None:
    """Run `coro` here until it first waits or ends. Ended: `answer(*args, value)` or
    `failed(*args)`, and None. Waiting: the Task that drives the rest, in a copy of the
    current context taken now (context variables set around this call hold in it)."""
    try:
        waiting_on = coro.send(None)
    except StopIteration as done:
        value = done.value
    except Exception:
        failed(*args)
        return None
    else:
        rest = _Resumed(coro, waiting_on, answer, failed, args)
        return asyncio.get_running_loop().create_task(rest, context=contextvars.copy_context())
    answer(*args, value)  # here, not in the `except`: no StopIteration to chain to
    return None


class _Resumed(Coroutine[Any, Any, None]):
    """A coroutine that has already run its first step, with what that step yielded (the
    future it waits on): a Task drives the rest, then the caller's callbacks answer. A Task
    sends None to resume a coroutine (a future's result is read by the awaiter), so the first
    send hands over that future; a bare yield (None) has already let the loop run, so the
    first send resumes the coroutine."""

    __slots__ = ("_answer", "_args", "_coro", "_failed", "_first")

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        first: Any,
        answer: Callable[..., None],
        failed: Callable[..., None],
        args: tuple[Any, ...],
    ) -> None:
        self._coro = coro
        self._first: Any = first
        self._answer = answer
        self._failed = failed
        self._args = args

    def send(self, value: Any) -> Any:
        first = self._first
        try:
            if first is not None:
                self._first = None
                return first
            return self._coro.send(value)
        except StopIteration as done:
            result = done.value
        except Exception:
            self._failed(*self._args)  # in the `except`: its log line carries the traceback
            raise StopIteration from None
        self._answer(*self._args, result)
        raise StopIteration

    def throw(self, *args: Any) -> Any:
        self._first = None
        try:
            return self._coro.throw(*args)
        except StopIteration as done:
            result = done.value
        except Exception:
            self._failed(*self._args)
            raise StopIteration from None
        self._answer(*self._args, result)
        raise StopIteration

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, None]:
        raise TypeError("a resumed coroutine is driven by its Task, never awaited")
