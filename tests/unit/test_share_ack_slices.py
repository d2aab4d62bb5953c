"""`AckSlices`: a big acknowledgement runs in slices with the loop free between them, later
acknowledgements of its share-partition wait their turn in arrival order, and a request
cancelled mid-way (its client went away) leaves its job to finish. `Slicer` under a fake clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.ack_slices import AckSlices
from broker.share.ack_job import STEP_RUNS
from broker.share.ack_job import AckJob
from broker.share.acknowledgements import OK
from broker.share.acknowledgements import AckOutcome
from broker.share.record_state import RecordState
from broker.slicing import Slicer
from tests.unit.test_share_ack_job import BIG
from tests.unit.test_share_ack_job import Batch
from tests.unit.test_share_ack_job import Broker
from tests.unit.test_share_ack_job import one_by_one

ACCEPT = 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_slicer_yields_only_once_its_budget_is_spent() -> None:
    clock = FakeClock()
    slicer = Slicer(0.010, clock)
    for _ in range(5):
        await slicer.pause()
    assert slicer.yields == 0
    clock.now = 0.010
    await slicer.pause()
    await slicer.pause()
    assert slicer.yields == 1  # and the next slice starts now


def starter(
    b: Broker, member: str, batches: list[Batch], log: list[tuple[str, int]], name: str
) -> Callable[[], AckJob | AckOutcome]:
    """Starts an acknowledgement, noting when (SPSO then: how far the others had got)."""

    def start() -> AckJob | AckOutcome:
        log.append((name, b.partition().spso))
        return b.begin(member, batches)

    return start


async def test_a_small_acknowledgement_takes_no_turn_and_no_task() -> None:
    b = Broker()
    b.fetch("A")
    slices = AckSlices()
    key = ("G", *b.key)
    assert await slices.acknowledge(key, starter(b, "A", one_by_one(0, 9), [], "small")) == OK
    assert not slices.busy(key)
    assert not slices._tasks  # done in the request's own step


async def test_a_big_one_runs_in_slices_and_later_ones_wait_their_turn_in_order() -> None:
    b = Broker()
    b.fetch("A")
    b.fetch("B", max_records=10)
    slices = AckSlices(budget_s=0.0)  # yield after every step: other tasks run between them
    key = ("G", *b.key)
    started: list[tuple[str, int]] = []
    big = asyncio.create_task(
        slices.acknowledge(key, starter(b, "A", one_by_one(0, BIG - 1), started, "big"))
    )
    await asyncio.sleep(0)
    assert slices.busy(key)
    ticks = 0
    later = [
        asyncio.create_task(
            slices.acknowledge(key, starter(b, "B", [Batch(o, o, [ACCEPT])], started, f"B{o}"))
        )
        for o in (BIG, BIG + 1, BIG + 2)
    ]
    while not big.done():  # the loop runs other work between the big job's steps
        ticks += 1
        await asyncio.sleep(0)
    assert await big == OK
    assert ticks >= 3 * (BIG // STEP_RUNS)
    assert [await t for t in later] == [OK, OK, OK]
    # In arrival order, each once the big one was all done (SPSO past it).
    assert [name for name, _ in started] == ["big", f"B{BIG}", f"B{BIG + 1}", f"B{BIG + 2}"]
    assert all(spso >= BIG for _, spso in started[1:])
    assert not slices.busy(key)


async def test_a_cancelled_request_leaves_its_job_to_finish() -> None:
    b = Broker()
    b.fetch("A")
    slices = AckSlices(budget_s=0.0)
    key = ("G", *b.key)
    request = asyncio.create_task(
        slices.acknowledge(key, starter(b, "A", one_by_one(0, BIG - 1), [], "big"))
    )
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    request.cancel()  # the client went away
    await asyncio.gather(request, return_exceptions=True)
    while slices.busy(key):
        await asyncio.sleep(0)
    sp = b.partition()
    assert (sp.spso, sp.in_flight_count()) == (BIG, 0)  # all of it applied
    # A waiter cancelled in the queue does not hold up the one after it.
    b.fetch("A", max_records=10)
    job = asyncio.create_task(
        slices.acknowledge(key, starter(b, "A", one_by_one(BIG, BIG + 9), [], "x"))
    )
    assert await job == OK
    assert sp.state_of(BIG)[0] is not RecordState.ACQUIRED


async def test_a_waiter_cancelled_in_the_queue_does_not_hold_up_the_next() -> None:
    b = Broker()
    b.fetch("A")
    b.fetch("B", max_records=10)
    slices = AckSlices(budget_s=0.0)
    key = ("G", *b.key)
    big = asyncio.create_task(
        slices.acknowledge(key, starter(b, "A", one_by_one(0, BIG - 1), [], "big"))
    )
    await asyncio.sleep(0)
    gone, next_one = (
        asyncio.create_task(slices.acknowledge(key, starter(b, "B", [Batch(o, o, [1])], [], "")))
        for o in (BIG, BIG + 1)
    )
    await asyncio.sleep(0)
    gone.cancel()
    assert await big == OK
    assert await next_one == OK
    assert (await asyncio.gather(gone, return_exceptions=True))[0].__class__ is (
        asyncio.CancelledError
    )
    assert not slices.busy(key)
    assert b.partition().state_of(BIG)[0] is RecordState.ACQUIRED  # the cancelled one never ran
    assert ErrorCode.none == OK.error_code


async def test_drain_waits_for_the_jobs_under_way() -> None:
    """Shutdown drains them before the logs close: a job ends whole, never half applied."""
    b = Broker()
    b.fetch("A")
    slices = AckSlices(budget_s=0.0)
    key = ("G", *b.key)
    request = asyncio.create_task(
        slices.acknowledge(key, starter(b, "A", one_by_one(0, BIG - 1), [], "big"))
    )
    await asyncio.sleep(0)
    request.cancel()  # the connection closed
    await slices.drain()
    assert not slices.busy(key)
    assert b.partition().spso == BIG
    await asyncio.gather(request, return_exceptions=True)
