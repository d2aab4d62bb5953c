"""DeleteRecords: move a partition's log start up, its share-partitions first (KIP-932).

Share state lives in the partition's own log, and recovery reads each share-partition's
newest checkpoint (at its SCO, named by its snapshot file) and the deltas after it. Seed 000's
rule is that nothing removes control records at or after the ESO (the lowest SCO). So the log
start moves in this order, each step durable before the next:

1. Every share-partition of the partition (loaded, or with durable state) archives its records
   below the new start, moves SPSO up to it, and writes its window as a new checkpoint at the
   log end (`SharePartitionManager.move_start_of`: plan, write, apply), one at a time with the
   event loop free in between.
2. The log's segments are synced, and the snapshot files brought up to the new checkpoints:
   the ESO now lies above the new start.
3. The new log start is saved (`log-start-offset-checkpoint`), then set in memory, and the
   segments wholly below it are deleted, except any the ESO still needs (a snapshot file that
   could not be written keeps its segments; retention deletes them once it catches up).

A crash between steps leaves the old log start with share-partitions already past it, which is
what the retried request would produce. Syncs and file writes run off the event loop; one
DeleteRecords at a time moves log starts, so saved and in-memory starts never cross.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from collections.abc import Callable

import structlog
from kio.schema.errors import ErrorCode

from broker.share.share_partition_manager import SharePartitionManager
from broker.to_the_end import Changes
from storage.errors import KafkaStorageError
from storage.errors import StorageError
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.segment import sync_all

log = structlog.get_logger("shoal.delete_records")


async def _sync(plog: PartitionLog) -> None:
    """Make the log's records (the new checkpoints among them) durable, in a thread."""
    failed = await asyncio.to_thread(sync_all, plog.start_flush())
    for sync, _ in failed:
        sync.segment.dirty = True  # the flush duty syncs it again
    if failed:
        raise KafkaStorageError(f"syncing the log failed: {failed[0][1]}")


class RecordDeletion:
    def __init__(
        self,
        logs: LogManager,
        share_partitions: SharePartitionManager,
        now_ms: Callable[[], int],
        *,
        write_snapshots: Callable[[], Awaitable[None]],
        min_retained_offset: Callable[[str, int], int | None],
        changes: Changes,
    ) -> None:
        self._logs = logs
        self._share_partitions = share_partitions
        self._now_ms = now_ms
        self._write_snapshots = write_snapshots  # the broker's snapshot duty, run now
        self._min_retained_offset = min_retained_offset  # the partition's ESO, if any
        self._lock = asyncio.Lock()
        self._changes = changes

    async def _move_share_partitions(
        self, topic_id: uuid.UUID, partition: int, log_start: int
    ) -> None:
        """One share-partition at a time, the loop free in between: one that is not loaded is
        recovered from its log first, a scan that may take milliseconds."""
        manager = self._share_partitions
        for key in manager.share_partitions_on(topic_id, partition):
            manager.move_start_of(key, log_start, self._now_ms())
            await asyncio.sleep(0)

    async def delete_records(
        self, topic: str, partition: int, offset: int
    ) -> tuple[ErrorCode, int]:
        """(error, low watermark) of moving the log start to `offset` (-1: the high watermark).

        UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE past the log end, KAFKA_STORAGE_ERROR
        when a write failed (the log start is then as it was). At or below the current log
        start nothing changes and the current one is answered. Run to its end (share
        partitions moved, log start written and applied) even if the request is cancelled
        meanwhile (`broker.to_the_end`).
        """
        return await self._changes.to_the_end(self._delete_records(topic, partition, offset))

    async def _delete_records(
        self, topic: str, partition: int, offset: int
    ) -> tuple[ErrorCode, int]:
        info = self._logs.topic(topic)
        plog = self._logs.log(topic, partition)
        if info is None or plog is None:
            return ErrorCode.unknown_topic_or_partition, -1
        async with self._lock:
            try:
                target = plog.log_start_target(offset)
            except StorageError as e:
                return e.error_code, -1
            if target <= plog.log_start_offset:
                return ErrorCode.none, plog.log_start_offset
            try:
                await self._move_share_partitions(info.topic_id, partition, target)
                await _sync(plog)
                await self._write_snapshots()
                await asyncio.to_thread(plog.save_log_start, target)
            except StorageError as e:
                log.error("log start not moved", topic=topic, partition=partition,
                          offset=target, error=str(e))  # fmt: skip
                return e.error_code, plog.log_start_offset
            deleted = plog.advance_log_start(target, self._min_retained_offset(topic, partition))
        log.info("log start moved", topic=topic, partition=partition,
                 log_start=plog.log_start_offset, segments_deleted=deleted)  # fmt: skip
        return ErrorCode.none, plog.log_start_offset
