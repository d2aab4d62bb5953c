"""The log cleaner's background duty: one pass per compacted partition that is dirty enough.

Planning and swapping run on the event loop and look at headers only; building the key map
and writing cleaned copies run in the cleaner's own thread (`storage.cleaner`). Where the next
pass's dirty part starts is kept in memory: after a restart the first pass treats the whole
log as dirty, which costs one extra pass and loses nothing. Each pass's key map is bounded by
``log.cleaner.dedupe.buffer.size`` (read afresh: it is dynamic, as in Kafka); a pass that
fills it stops there, and the next one goes on from that offset.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import structlog

from broker.metrics import BrokerMetrics
from protocol.record_batch import InvalidRecordBatch
from storage.base_log import SegmentedLog
from storage.cleaner import CleaningJob
from storage.cleaner import CleaningResult
from storage.cleaner import SegmentDamaged
from storage.cleaner import plan_cleaning
from storage.cleaner import record_found_damage
from storage.cleaner import release_replaced
from storage.cleaner import run_cleaning
from storage.cleaner import swap_one
from storage.log_manager import LogManager
from storage.offset_map import entries_for

log: structlog.typing.FilteringBoundLogger = structlog.get_logger("shoal.cleaner")


class LogCleaner:
    def __init__(
        self,
        logs: LogManager,
        metrics: BrokerMetrics,
        now_ms: Callable[[], int],
        dedupe_buffer_bytes: Callable[[], int],
    ) -> None:
        self._logs = logs
        self._dedupe_buffer_bytes = dedupe_buffer_bytes
        self._metrics = metrics
        self._now_ms = now_ms
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shoal-cleaner")
        self._clean_to: dict[tuple[str, int], int] = {}

    async def run(self, eso: Mapping[tuple[str, int], int]) -> int:
        """One pass over every partition worth cleaning; how many were cleaned."""
        cleaned = 0
        entries = entries_for(self._dedupe_buffer_bytes())
        for tp, plog in self._logs.partition_logs():
            if not isinstance(plog, SegmentedLog):
                continue
            first_dirty = self._clean_to.get(tp, 0)
            job = plan_cleaning(plog, self._now_ms(), eso.get(tp), first_dirty, entries)
            if job is not None and await self._clean(tp, job):
                cleaned += 1
        return cleaned

    async def _clean(self, tp: tuple[str, int], job: CleaningJob) -> bool:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._executor, run_cleaning, job)
            swapped = []
            for old, copy in result.copies:
                if swap_one(job.log, old, copy, result.aborts.get(old.base_offset, ())):
                    swapped.append(copy)
                await asyncio.sleep(0)  # a few renames at a time: the loop serves in between
            await loop.run_in_executor(self._executor, release_replaced, swapped)
        except SegmentDamaged as e:
            # Recorded as every reader records damage (one line with file and offsets, counted);
            # plans stop before a damaged segment, so the next pass cleans the ones before it.
            record_found_damage(e)
            log.warning("log cleaning stopped at a damaged segment; the log is as it was",
                        topic=tp[0], partition=tp[1])  # fmt: skip
            return False
        except (OSError, InvalidRecordBatch) as e:
            log.error("log cleaning failed; the log is as it was", topic=tp[0], partition=tp[1],
                      error=str(e))  # fmt: skip
            self._clean_to[tp] = job.end_offset  # tried again once more of the log is dirty
            return False
        self._clean_to[tp] = result.end_offset
        self._report(tp, result, len(swapped), time.monotonic() - started)
        return True

    def _report(
        self, tp: tuple[str, int], result: CleaningResult, swapped: int, secs: float
    ) -> None:
        stats = result.stats
        self._metrics.on_cleaning(stats.bytes_read, stats.records_removed)
        log.info(
            "log cleaned", topic=tp[0], partition=tp[1], segments=len(result.job.segments),
            rewritten=swapped, records_removed=stats.records_removed, bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written, unreadable_batches=stats.unreadable_batches,
            eso=result.job.eso, cleaned_to=result.end_offset, seconds=round(secs, 3),
        )  # fmt: skip

    def shutdown(self) -> None:
        """Wait for a pass under way: its committed copies are swapped in at the next open."""
        self._executor.shutdown(wait=True)
