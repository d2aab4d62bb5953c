"""Group commit: the fsyncs that produce requests need (`log.flush.interval.messages`) run
once per loop tick, in the flush thread, for every request of that tick.

A producer pipelines requests, and a read brings many of them at once: each used to fsync its
partition on the event loop before answering. Now each request appends, asks `durable` for its
logs, and is answered when the one batch of fsyncs that covers its bytes is done. The answer
still follows the sync (acks are durable before the response); a failed sync answers
KAFKA_STORAGE_ERROR to the requests of that log only, and leaves its segments dirty for the
flush duty.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import Executor

from storage.errors import KafkaStorageError
from storage.log import PartitionLog
from storage.segment import PendingSync
from storage.segment import sync_all

_Failed = list[tuple[PendingSync, OSError]]


class GroupCommit:
    def __init__(self, executor: Executor) -> None:
        self._executor = executor  # the broker's flush thread: one sync batch at a time
        # This tick's logs to sync, and the futures of the requests waiting on each.
        self._logs: dict[int, PartitionLog] = {}
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.batches = 0  # sync batches run (a test reads it)

    async def durable(self, logs: Iterable[PartitionLog]) -> set[int]:
        """Wait until the given logs' appended bytes are synced; the ids (`id(log)`) of the
        logs whose sync failed."""
        loop = asyncio.get_running_loop()
        waits: list[tuple[int, asyncio.Future[None]]] = []
        for plog in logs:
            if not self._logs:
                loop.call_soon(self._start)
            key = id(plog)
            self._logs[key] = plog
            future = loop.create_future()
            self._waiters.setdefault(key, []).append(future)
            waits.append((key, future))
        failed = set()
        for key, future in waits:
            try:
                await future
            except KafkaStorageError:
                failed.add(key)
        return failed

    def _start(self) -> None:
        logs, waiters = self._logs, self._waiters
        self._logs, self._waiters = {}, {}
        owner: dict[int, int] = {}
        pending: list[PendingSync] = []
        for key, plog in logs.items():
            for sync in plog.start_flush():
                owner[id(sync)] = key
                pending.append(sync)
        self.batches += 1
        done = asyncio.get_running_loop().run_in_executor(self._executor, sync_all, pending)
        done.add_done_callback(lambda f: self._finish(f, owner, waiters))

    @staticmethod
    def _finish(
        done: asyncio.Future[_Failed],
        owner: dict[int, int],
        waiters: dict[int, list[asyncio.Future[None]]],
    ) -> None:
        error = done.exception()
        failed_logs: dict[int, str] = {}
        if error is not None:  # the thread itself failed: nothing is known to be synced
            failed_logs = {key: str(error) for key in waiters}
        else:
            for sync, os_error in done.result():
                sync.segment.dirty = True  # synced again by the flush duty
                failed_logs[owner[id(sync)]] = os_error.strerror or str(os_error)
        for key, futures in waiters.items():
            for future in futures:
                if future.done():
                    continue
                if key in failed_logs:
                    future.set_exception(KafkaStorageError(f"fsync failed: {failed_logs[key]}"))
                else:
                    future.set_result(None)
