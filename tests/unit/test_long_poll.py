"""The one long poll of Fetch and ShareFetch, driven by a real Notifier and a fake clock."""

from __future__ import annotations

import asyncio

from broker.long_poll import long_poll
from broker.notifier import Notifier
from broker.notifier import Turn


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


async def _parked(notifier: Notifier, key: str, turn: Turn | None) -> asyncio.Task[bool]:
    task = asyncio.create_task(notifier.wait([key], 30, turn))
    await asyncio.sleep(0)  # now waiting
    return task


async def test_a_counted_notification_wakes_that_many_in_line_oldest_first() -> None:
    """A ShareFetch's records go to one waiter each: one record wakes one fetch, not all
    (issue 33); fetches without a turn (Fetch reads for itself) are all woken."""
    notifier = Notifier()
    turns = [Turn() for _ in range(3)]
    in_line = [await _parked(notifier, "k", t) for t in turns]
    plain = await _parked(notifier, "k", None)
    notifier.notify("k", 1)
    await asyncio.sleep(0)
    assert [t.done() for t in in_line] == [True, False, False]
    assert plain.done() and turns[0].woke == "k"
    notifier.notify("k", 5)  # more than wait: the rest
    await asyncio.sleep(0)
    assert all(t.done() for t in in_line)
    assert not notifier._waiters


async def test_an_uncounted_notification_wakes_every_waiter_in_line() -> None:
    notifier = Notifier()
    tasks = [await _parked(notifier, "k", Turn()) for _ in range(3)]
    notifier.notify("k")  # records came back, a transaction ended: how many is not known
    await asyncio.sleep(0)
    assert all(t.done() and t.result() is True for t in tasks)


async def test_a_waiter_woken_for_nothing_keeps_its_turn() -> None:
    notifier = Notifier()
    first, second, third = Turn(), Turn(), Turn()
    a = await _parked(notifier, "k", first)
    b = await _parked(notifier, "k", second)
    notifier.notify("k", 1)
    await asyncio.sleep(0)
    assert a.done() and not b.done()
    c = await _parked(notifier, "k", third)  # a newcomer, then the first waits again
    again = await _parked(notifier, "k", first)
    notifier.notify("k", 1)
    await asyncio.sleep(0)
    assert (again.done(), b.done(), c.done()) == (True, False, False)
    notifier.notify("k", 1)
    await asyncio.sleep(0)
    assert (b.done(), c.done()) == (True, False)
    c.cancel()
    await asyncio.gather(c, return_exceptions=True)
    assert not notifier._waiters


async def test_a_woken_waiter_cancelled_before_it_ran_passes_its_wake_on() -> None:
    """A connection closed between the wake and the attempt must not strand the record."""
    notifier = Notifier()
    woken = await _parked(notifier, "k", Turn())
    nxt = await _parked(notifier, "k", Turn())
    notifier.notify("k", 1)
    woken.cancel()  # before it ran: it holds the wake
    await asyncio.gather(woken, return_exceptions=True)
    await asyncio.sleep(0)
    assert woken.cancelled() and nxt.done() and nxt.result() is True


async def test_a_long_poll_in_line_that_left_records_wakes_the_next() -> None:
    notifier = Notifier()
    values = iter([0, 3])
    left: list[tuple[int, object]] = []

    def in_line(result: int, key: object) -> bool:
        left.append((result, key))
        return True  # e.g. it stopped at MaxRecords

    task = asyncio.create_task(
        long_poll(
            lambda: _now(next(values)), enough=lambda n: n >= 1, wait_keys=lambda _: ["k"],
            notifier=notifier, max_wait_s=30, in_line=in_line,
        )
    )  # fmt: skip
    await asyncio.sleep(0)
    later = await _parked(notifier, "k", Turn())
    notifier.notify("k", 1)  # the long poll's turn: it comes first
    assert await asyncio.wait_for(task, 1) == 3
    assert left == [(3, "k")]
    await asyncio.sleep(0)
    assert later.done() and later.result() is True


async def test_a_long_poll_woken_for_nothing_at_its_deadline_wakes_nobody() -> None:
    """Nothing for the one woken means nothing for the next: no wake-up is passed on."""
    notifier = Notifier()
    clock = Clock()

    async def attempt() -> int:
        return 0

    task = asyncio.create_task(
        long_poll(
            attempt, enough=lambda n: n >= 1, wait_keys=lambda _: ["k"], notifier=notifier,
            max_wait_s=5, monotonic=clock, in_line=lambda result, key: True,
        )
    )  # fmt: skip
    await asyncio.sleep(0)
    later = await _parked(notifier, "k", Turn())
    clock.now = 10  # its time is up when it wakes
    notifier.notify("k", 1)
    assert await asyncio.wait_for(task, 1) == 0
    await asyncio.sleep(0)
    assert not later.done()
    later.cancel()
    await asyncio.gather(later, return_exceptions=True)
