"""LoopReadings: a scrape thread gets readings made on the event loop, never live state read
from its own thread; a loop that does not answer costs the scrape the timeout, not a hang."""

from __future__ import annotations

import asyncio
import threading
import time

import structlog

from broker.loop_readings import LoopReadings


async def test_a_reading_is_made_on_the_loop_while_the_loop_runs_other_work() -> None:
    made_on: list[int] = []
    gate = asyncio.Event()

    async def compute() -> int:
        made_on.append(threading.get_ident())
        await gate.wait()  # between slices the loop runs other work
        return len(made_on)

    readings = LoopReadings(compute, 0, timeout_s=10)
    readings.attach()
    scrape = asyncio.create_task(asyncio.to_thread(readings.read))
    deadline = time.monotonic() + 5
    while not made_on and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # this loop is free while the scrape waits
    gate.set()
    assert await scrape == 1
    assert made_on == [threading.get_ident()]  # the loop's thread, not the scrape's
    assert readings.read() == 1  # from the loop's own thread: the last reading, no wait
    assert await asyncio.to_thread(readings.read) == 2  # a later scrape: a fresh one


async def test_a_stalled_loop_serves_the_last_reading_after_the_timeout_and_says_so() -> None:
    async def compute() -> str:
        return "fresh"

    readings = LoopReadings(compute, "last", timeout_s=0.2)
    readings.attach()
    got: list[str] = []
    answered = threading.Event()

    def scrape() -> None:
        got.append(readings.read())
        answered.set()

    with structlog.testing.capture_logs() as logs:
        threading.Thread(target=scrape).start()
        # The loop's thread is held until the scrape answers, as a stalled loop would be.
        assert answered.wait(timeout=10)
    assert got == ["last"]
    assert [e["event"] for e in logs].count(
        "metrics reading timed out: the event loop did not answer; the last reading is served"
    ) == 1
    assert await asyncio.to_thread(readings.read) == "fresh"  # once the loop runs again


async def test_a_detached_reader_serves_the_last_reading() -> None:
    async def compute() -> str:
        raise AssertionError("not asked once detached")

    readings = LoopReadings(compute, "last")
    readings.attach()
    readings.detach()
    assert await asyncio.to_thread(readings.read) == "last"
