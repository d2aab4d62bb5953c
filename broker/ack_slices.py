"""Acknowledgements of a share-partition, one at a time while one of them takes several steps.

Nearly every acknowledgement is done in the step that starts it (`broker.share.ack_job`),
with no yield to the loop, so nothing comes between two of them. A big one (thousands of
ranges) is done in steps, and the loop serves other clients in between. Until it is done,
later acknowledgements of the same share-partition wait their turn, in arrival order: Kafka
applies a partition's acknowledgements one at a time, under its lock, and serves one request
per connection at a time, so a client's next acknowledgement never overtakes its last.

A job, once it takes more than one step, runs to its end in a task of its own: a client that
goes away mid-way must leave neither memory behind the share state already written nor the
share-partition locked.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.share.ack_job import AckJob
from broker.share.acknowledgements import AckOutcome
from broker.share.acknowledgements import outcome
from broker.share.share_partition import SharePartitionKey
from broker.slicing import SLICE_SECONDS
from broker.slicing import Slicer

Start = Callable[[], "AckJob | AckOutcome"]


class AckSlices:
    """The queue of acknowledgements per share-partition with a job in progress."""

    def __init__(
        self, budget_s: float = SLICE_SECONDS, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._budget_s = budget_s
        self._clock = clock  # the slices' clock (a fake one in tests)
        # A key is present while a job of it is in progress; its futures are the waiters.
        self._queues: dict[SharePartitionKey, deque[asyncio.Future[None]]] = {}
        self._tasks: set[asyncio.Task[AckOutcome]] = set()

    def busy(self, key: SharePartitionKey) -> bool:
        return bool(self._queues) and key in self._queues  # the key's hash is not free

    async def drain(self) -> None:
        """Wait for the jobs under way (shutdown: before the logs close)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def acknowledge(self, key: SharePartitionKey, start: Start) -> AckOutcome:
        """Start one acknowledgement of `key` (when it is its turn) and see it to its end."""
        if not self.busy(key):  # the common case: nothing to wait for, nothing to record
            started = start()
            if isinstance(started, AckOutcome):
                return started
            return await self.run(key, started)
        await self._turn(key)
        try:
            started = start()
            if isinstance(started, AckOutcome) or _first_step(started):
                self._leave(key)
                return started if isinstance(started, AckOutcome) else outcome(started)
        except BaseException:
            self._leave(key)
            raise
        return await self._drive(key, started)

    async def run(self, key: SharePartitionKey, job: AckJob) -> AckOutcome:
        """See a job to its end that was begun just now (no yield since) while `key` was not
        busy: its first step here, the rest in a task, with later ones waiting their turn."""
        if _first_step(job):
            return outcome(job)
        self._queues[key] = deque()  # still our turn: nothing ran since the job began
        return await self._drive(key, job)

    async def _turn(self, key: SharePartitionKey) -> None:
        """Wait until the acknowledgements of `key` before this one are done."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues[key].append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._leave(key)  # handed the turn as we were cancelled: pass it on
            raise

    def _leave(self, key: SharePartitionKey) -> None:
        """Hand the turn to the next waiter still waiting, or free the key."""
        waiters = self._queues[key]
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        del self._queues[key]

    async def _drive(self, key: SharePartitionKey, job: AckJob) -> AckOutcome:
        task = asyncio.get_running_loop().create_task(self._steps(key, job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)  # a cancelled request leaves the job running

    async def _steps(self, key: SharePartitionKey, job: AckJob) -> AckOutcome:
        slicer = Slicer(self._budget_s, self._clock)
        try:
            while not job.step():
                await slicer.pause()
        except BaseException:
            job.abandon(ErrorCode.unknown_server_error)  # never leave the partition locked
            raise
        finally:
            self._leave(key)
        return outcome(job)


def _first_step(job: AckJob) -> bool:
    """The job's first step; whether that finished it. A job that fails is ended, so that its
    share-partition is not left locked."""
    try:
        return job.step()
    except BaseException:
        job.abandon(ErrorCode.unknown_server_error)
        raise
