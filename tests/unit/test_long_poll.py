"""The one long poll of Fetch and ShareFetch, driven by a real Notifier and a fake clock."""

from __future__ import annotations

import asyncio

from broker.long_poll import long_poll
from broker.notifier import Notifier


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_enough_at_once_never_waits() -> None:
    calls: list[int] = []

    async def attempt() -> int:
        calls.append(1)
        return 5

    result = await long_poll(
        attempt,
        enough=lambda n: n >= 1,
        wait_keys=lambda _: ["k"],
        notifier=Notifier(),
        max_wait_s=30,
    )
    assert (result, len(calls)) == (5, 1)


async def test_a_notification_brings_another_attempt() -> None:
    notifier = Notifier()
    values = iter([0, 3])
    task = asyncio.create_task(
        long_poll(
            lambda: _now(next(values)),
            enough=lambda n: n >= 1,
            wait_keys=lambda _: ["k"],
            notifier=notifier,
            max_wait_s=30,
        )
    )
    await asyncio.sleep(0)
    assert not task.done()
    notifier.notify("k")
    assert await asyncio.wait_for(task, 1) == 3


async def test_nothing_to_wait_on_or_no_time_left_returns_the_last_result() -> None:
    no_keys = await long_poll(
        lambda: _now(0),
        enough=lambda n: n >= 1,
        wait_keys=lambda _: [],
        notifier=Notifier(),
        max_wait_s=30,
    )
    clock = Clock()

    async def attempt() -> int:
        clock.now += 10  # each attempt uses up the wait
        return 0

    timed_out = await long_poll(
        attempt,
        enough=lambda n: n >= 1,
        wait_keys=lambda _: ["k"],
        notifier=Notifier(),
        max_wait_s=5,
        monotonic=clock,
    )
    assert (no_keys, timed_out) == (0, 0)


async def test_a_notification_resumes_the_waiter_in_the_next_loop_pass() -> None:
    """On a busy loop each pass costs a share consumer's record latency: one pass, not two."""
    notifier = Notifier()
    task = asyncio.create_task(notifier.wait(["k"], 30))
    await asyncio.sleep(0)  # the task now waits on "k"
    notifier.notify("k")
    await asyncio.sleep(0)  # one pass of the loop
    assert task.done()
    assert task.result() is True
    assert not notifier._waiters


async def test_a_wait_times_out_and_leaves_no_waiter_behind() -> None:
    notifier = Notifier()
    assert await notifier.wait(["k", "j"], 0.01) is False
    assert not notifier._waiters
    notifier.notify("k")  # nothing left to wake


async def test_a_cancelled_wait_leaves_no_waiter_behind() -> None:
    notifier = Notifier()
    task = asyncio.create_task(notifier.wait(["k"], 30))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert not notifier._waiters


async def _now(value: int) -> int:
    return value
