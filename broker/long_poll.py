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
) -> T:
    """Call `attempt` until its result is `enough`, the wait is over, or there is no partition
    to wait on; return the last result. An attempt is a coroutine: one that reads a million
    partitions yields between slices."""
    deadline = monotonic() + max_wait_s
    while True:
        result = await attempt()
        left = deadline - monotonic()
        if enough(result) or left <= 0:
            return result
        keys = wait_keys(result)
        if not keys:
            return result
        release_order()  # only waiting on producers now: the connection's next requests may run
        await notifier.wait(keys, left)
