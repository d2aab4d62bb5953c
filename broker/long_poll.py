"""The long poll of Fetch and ShareFetch: try, and if there is not enough yet, wait for a
partition the request reads to change, until the request's MaxWaitMs is spent."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Hashable
from typing import TypeVar

from broker.notifier import Notifier
from broker.notifier import Turn
from broker.request_order import release_order

T = TypeVar("T")


async def long_poll(
    attempt: Callable[[], Awaitable[T]],
    *,
    enough: Callable[[T], bool],
    wait_keys: Callable[[T], Collection[Hashable]],
    notifier: Notifier,
    max_wait_s: float,
    monotonic: Callable[[], float] = time.monotonic,
    in_line: Callable[[T, Hashable], bool] | None = None,
) -> T:
    """Call `attempt` until its result is `enough`, the wait is over, or there is no partition
    to wait on; return the last result. An attempt is a coroutine: one that reads a million
    partitions yields between slices.

    With `in_line`, the request waits in line (`notifier.Turn`: a ShareFetch, whose records go
    to one waiter each): woken by a key and done, `in_line(result, key)` says whether it may
    have left records there that it was woken for, and then the next in line is woken."""
    deadline = monotonic() + max_wait_s
    turn = Turn() if in_line is not None else None
    while True:
        result = await attempt()
        left = deadline - monotonic()
        done = enough(result)
        if done or left <= 0:
            # Woken and found nothing: nothing was left there for the next one either.
            woke = turn.woke if turn is not None and done else None
            if woke is not None and in_line is not None and in_line(result, woke):
                notifier.notify(woke, 1)
            return result
        keys = wait_keys(result)
        if not keys:
            return result
        release_order()  # only waiting on producers now: the connection's next requests may run
        await notifier.wait(keys, left, turn)
