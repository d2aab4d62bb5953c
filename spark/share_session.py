"""The driver-side member of a streaming query's share group (see `spark.stream`): a
`ShareConsumer` on a private loop, the batches it holds as ranges, their renewal and their
acknowledgement. Only the process that runs the stream reader's `latestOffset` and `commit`
imports this module; Spark's tasks, which only decode, do not.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from client.admin import Admin
from client.errors import KafkaError
from client.read_committed import READ_COMMITTED
from client.records import AcquiredData
from client.share_acks import AcknowledgeType
from client.share_consumer import AckResults
from client.share_consumer import ShareConsumer
from spark.acks import RecordKey
from spark.acks import take_verdicts
from spark.acquire import Taker
from spark.group_state import GroupLimits
from spark.group_state import group_limits
from spark.group_state import read_committed_group
from spark.group_state import window_warning
from spark.loop import LoopThread
from spark.options import AT_MOST_ONCE
from spark.options import SHIP
from spark.options import StreamOptions
from spark.progress import latest_report
from spark.progress import source_metrics
from spark.ranges import Span
from spark.ranges import carve
from spark.ranges import count
from spark.ranges import spans_of

log = logging.getLogger(__name__)

_DRAIN_POLL_S = 0.2  # AvailableNow: how often an idle reader asks whether the group is drained
_DRAIN_PATIENCE_S = 120.0  # AvailableNow: give up waiting on the group after no progress
_TICK_S = 0.1
_LAG_EVERY_S = 5.0  # how often the progress's shareGroupLag is asked of the broker


@dataclass
class _Batch:
    seq: int
    spans: list[Span]
    acquired: list[AcquiredData]  # kept only when the driver ships the bytes
    offset: dict[str, Any]  # what Spark was told this batch's end offset is (spark.progress)
    settled: bool = False


class ShareGroupSession:
    """The driver-side member: a ShareConsumer on a private loop, the batches it holds (as
    ranges), and the task that renews their locks. Every method is called from Spark's (one)
    thread; the consumer is only touched on the loop."""

    def __init__(self, opts: StreamOptions) -> None:
        self.opts = opts
        self.loop = LoopThread("shoal-share-reader")
        self._admin: Admin | None = None
        try:  # before the consumer's first fetch: the group's isolation applies to it
            self.limits = self.loop.run(self._group_limits())
        except BaseException:
            self.loop.run(self._close_admin(), timeout=10)
            self.loop.close()
            raise
        self.consumer = ShareConsumer(
            opts.bootstrap,
            opts.group,
            acknowledgement_mode="explicit",
            client_id=opts.client_id,
            security=opts.security,
            on_acknowledgement=_log_failures,
            record_limit=True,  # the read limit is exact, as Spark's Kafka source's
        )
        self.consumer.subscribe(opts.topics)
        self.taker = Taker(self.consumer, self.limits.delivery_count_limit)
        self._window_checked = False
        self.batches: dict[int, _Batch] = {}
        self.available_now = False
        self.targets: dict[tuple[str, int], tuple[int, int]] = {}  # (earliest, end) at start
        self.drained = False
        self._touched = time.monotonic()
        self._lag_view: tuple[float, dict[tuple[str, int], int], int | None] | None = None
        self._lock = self.loop.run(self._make_lock())
        self._renewer = self.loop.spawn(self._renew_forever())

    @staticmethod
    async def _make_lock() -> asyncio.Lock:
        return asyncio.Lock()

    # -- acquiring ----------------------------------------------------------------------------

    def acquire(self, limit: int) -> list[AcquiredData]:
        return self.loop.run(self._acquire(limit))

    async def _acquire(self, limit: int) -> list[AcquiredData]:
        """Up to `limit` records for one micro-batch (`spark.acquire`: exactly up to it, and
        redelivered records in shrinking batches), waiting up to pollTimeoutMs for the first
        (with AvailableNow, until the group is drained); the first poll carries the
        acknowledgements that `settle_through` queued."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.opts.poll_timeout_ms / 1000
        out: list[AcquiredData] = []
        polls = 0
        drain = _DrainWatch()
        async with self._lock:
            while True:
                wait = max(0.0, deadline - loop.time())
                if self.available_now:
                    # The first poll carries the last batch's acks, after which the group is
                    # often drained: if it brings nothing, ask at once instead of waiting.
                    wait = _DRAIN_POLL_S if polls else 0.0
                polls += 1
                out = await self.taker.take(limit, wait)
                self._check_window(limit, count(out))
                if out:
                    self._touched = time.monotonic()
                    break
                if self.available_now:  # no deadline: wait until the group is drained
                    if await self._is_drained(drain):
                        self.drained = True
                        break
                    continue
                if loop.time() >= deadline:
                    break
            await self.consumer.commit_sync()  # acks that no poll could carry
        if self.available_now and out and not self._below_targets(out):
            # Only records produced after the start: process them, and end after this batch
            # if nobody holds anything below the ends.
            self.drained = await self._run_is_drained()
        return out

    def _admin_client(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(
                self.opts.bootstrap, client_id="shoal-spark-admin", security=self.opts.security
            )
        return self._admin

    async def _group_limits(self) -> GroupLimits:
        """The group's limits; with kafka.isolation.level=read_committed, its isolation set
        to read_committed first if it is not (`read_committed_group`: OptionError if refused)."""
        try:
            limits = await group_limits(self._admin_client(), self.opts.group)
        except (KafkaError, OSError) as e:
            log.info("reading share group %s's limits failed (Kafka's defaults assumed): %s",
                     self.opts.group, e)  # fmt: skip
            limits = GroupLimits(isolation_level="unknown")  # set it if asked to read committed
        if self.opts.isolation_level == READ_COMMITTED:
            limits = await read_committed_group(self._admin_client(), self.opts.group, limits)
        return limits

    async def _close_admin(self) -> None:
        if self._admin is not None:
            await self._admin.close()

    def _check_window(self, limit: int, taken: int) -> None:
        """Say once, at the first micro-batch the group's lock window filled short of the read
        limit, which setting caps it (a backlog too small to reach either says nothing)."""
        assigned = self.taker.fronts.seen
        if self._window_checked or not assigned or self.opts.max_records_per_trigger is None:
            return
        if taken >= limit or taken < self.limits.record_locks * len(assigned):
            return
        self._window_checked = True
        warning = window_warning(
            limit, len(assigned), self.limits, self.opts.group, self.opts.read_limit_option
        )
        if warning is not None:
            log.warning(warning)

    async def _run_is_drained(self) -> bool:
        async with self._lock:
            return await self._is_drained(None)

    def _below_targets(self, acquired: list[AcquiredData]) -> bool:
        for a in acquired:
            _, end = self.targets.get((a.topic, a.partition), (0, 1 << 62))
            if any(r.first_offset < end for r in a.ranges):
                return True
        return False

    def prepare_available_now(self) -> None:
        self.available_now = True
        self.targets = self.loop.run(self._end_offsets())

    async def _partitions(self) -> list[tuple[str, int]]:
        admin = self._admin_client()
        await admin.cluster.bootstrap()
        return [(t, p) for t in self.opts.topics for p in (await admin.cluster.topic(t)).partitions]

    async def _end_offsets(self) -> dict[tuple[str, int], tuple[int, int]]:
        admin = self._admin_client()
        tps = await self._partitions()
        found = await asyncio.gather(  # all in flight at once: the query waits for them
            *(
                admin.list_offsets(t, p, spec, self.opts.isolation_level)  # latest: LSO if rc
                for t, p in tps
                for spec in ("earliest", "latest")
            )
        )
        return {tp: (found[2 * i], found[2 * i + 1]) for i, tp in enumerate(tps)}

    async def _is_drained(self, watch: _DrainWatch | None) -> bool:
        """No record below the noted end offsets is available or acquired by anyone in the
        group: every share-partition's start offset (SPSO) has reached its end."""
        wanted = [tp for tp, (lo, end) in self.targets.items() if end > lo]
        if not wanted:
            return True
        try:
            admin = self._admin_client()
            offsets = await admin.describe_share_group_offsets(self.opts.group, wanted)
        except (KafkaError, OSError) as e:
            log.info("describing the group's offsets failed: %s", e)
            offsets = {}
        starts = {tp: offsets[tp].start_offset if tp in offsets else -1 for tp in wanted}
        if all(starts[tp] >= self.targets[tp][1] for tp in wanted):
            return True
        if watch is not None and watch.stalled(sum(starts.values())):
            log.warning(
                "AvailableNow: the group made no progress below the end offsets for %.0f s "
                "(start offsets %s, ends %s); ending the run",
                _DRAIN_PATIENCE_S,
                starts,
                {tp: self.targets[tp][1] for tp in wanted},
            )
            return True
        return False

    # -- progress -----------------------------------------------------------------------------

    def latest_report(self, read_to: dict[tuple[str, int], int]) -> dict[str, Any] | None:
        """The log end offsets and the source's metrics for Spark's progress (`spark.progress`);
        None when the broker could not say (the progress then shows no latest offset)."""
        try:
            return self.loop.run(self._latest_report(read_to), timeout=10)
        except Exception as e:  # only the progress report loses this trigger's figures
            log.info("reading the latest offsets and the group's lag failed: %s", e)
            return None

    async def _latest_report(self, read_to: dict[tuple[str, int], int]) -> dict[str, Any]:
        admin = self._admin_client()
        tps = await self._partitions()
        level = self.opts.isolation_level  # read_committed: the LSO, where the group stops
        ends = await asyncio.gather(*(admin.list_offsets(t, p, "latest", level) for t, p in tps))
        latest = dict(zip(tps, ends, strict=True))
        starts, lag = await self._group_lag(tps)
        # A partition the group has not started begins at its reset point when it does.
        unstarted = [tp for tp in tps if tp not in starts and tp not in read_to]
        if unstarted and self.limits.auto_offset_reset == "earliest":
            firsts = await asyncio.gather(
                *(admin.list_offsets(t, p, "earliest") for t, p in unstarted)
            )
            starts.update(zip(unstarted, firsts, strict=True))
        return latest_report(latest, source_metrics(latest, read_to, starts, lag))

    async def _group_lag(
        self, tps: list[tuple[str, int]]
    ) -> tuple[dict[tuple[str, int], int], int | None]:
        """The group's start offsets and lag (records), asked at most every `_LAG_EVERY_S`:
        the broker counts the control records between each partition's window and its log
        end to tell records from offsets, which costs it more than a trigger should."""
        now = time.monotonic()
        if self._lag_view is not None and now - self._lag_view[0] < _LAG_EVERY_S:
            return self._lag_view[1], self._lag_view[2]
        try:
            group = await self._admin_client().describe_share_group_offsets(self.opts.group, tps)
        except KafkaError:  # no such group yet: no lag to report
            group = {}
        lags = [o.lag for o in group.values() if o.lag >= 0]  # -1: a partition not started
        lag = sum(lags) if lags else None
        starts = {tp: o.start_offset for tp, o in group.items() if o.start_offset >= 0}
        self._lag_view = (now, starts, lag)
        return dict(starts), lag

    # -- acknowledging ------------------------------------------------------------------------

    def hold(self, seq: int, acquired: list[AcquiredData], offset: dict[str, Any]) -> None:
        keep = acquired if self.opts.data_path == SHIP else []
        batch = self.batches[seq] = _Batch(seq, spans_of(acquired), keep, offset)
        if self.opts.ack_mode == AT_MOST_ONCE:
            self.loop.run(self._settle([batch], verdicts=False, send=True))

    def settle_through(self, seq: int, *, send: bool) -> None:
        """Spark committed every batch up to `seq`: acknowledge them and forget them. With
        `send` false the acknowledgements wait for the next poll, which follows at once."""
        done = [b for s, b in sorted(self.batches.items()) if s <= seq]
        if not done:
            return
        self.loop.run(self._settle([b for b in done if not b.settled], verdicts=True, send=send))
        for b in done:
            del self.batches[b.seq]

    def flush(self) -> None:
        self.loop.run(self._flush())

    async def _flush(self) -> None:
        async with self._lock:
            await self.consumer.commit_sync()

    async def _settle(self, batches: list[_Batch], *, verdicts: bool, send: bool) -> None:
        spans = [s for b in batches for s in b.spans]
        if not spans:
            return
        found: dict[RecordKey, AcknowledgeType] = {}
        if verdicts:
            found = take_verdicts(self.opts.ack_dir, _holds(spans))
        marked: dict[tuple[str, int, int], dict[int, AcknowledgeType]] = {}
        for (topic, partition, offset, dc), verdict in found.items():
            marked.setdefault((topic, partition, dc), {})[offset] = verdict
        async with self._lock:
            for s in spans:
                mine = marked.get((s.topic, s.partition, s.delivery_count), {})
                for first, last, kind in carve(s, mine):
                    self.consumer.acknowledge_range(
                        s.topic, s.partition, first, last, kind or AcknowledgeType.ACCEPT
                    )
                    if kind is AcknowledgeType.RELEASE:  # back to the group, ahead of the rest
                        self.taker.fronts.released((s.topic, s.partition))
            if send:
                await self.consumer.commit_sync()
        for b in batches:
            b.settled = True
        if found:
            log.info("batch verdicts: %d rejected or released", len(found))

    def pending_after(self, seq: int) -> dict[str, Any] | None:
        """The offset of the highest batch planned after `seq` and not yet committed, if any."""
        later = [s for s in self.batches if s > seq]
        return self.batches[max(later)].offset if later else None

    def between(self, start: int, end: int) -> list[_Batch]:
        return [b for s, b in sorted(self.batches.items()) if start < s <= end]

    # -- renewing -----------------------------------------------------------------------------

    def _renew_interval(self) -> float:
        if self.opts.renew_interval_ms is not None:
            return self.opts.renew_interval_ms / 1000
        lock_ms = self.consumer.acquisition_lock_timeout_ms or 30_000
        return max(0.05, lock_ms / 3000)

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(_TICK_S)
            if time.monotonic() - self._touched < self._renew_interval():
                continue
            try:
                await self._renew()
            except Exception as e:  # a failed renewal must not end the loop
                log.warning("renewing record locks failed: %s", e)
            self._touched = time.monotonic()

    async def _renew(self) -> None:
        async with self._lock:
            held = [s for b in self.batches.values() if not b.settled for s in b.spans]
            if not held:
                return
            for s in held:
                self.consumer.acknowledge_range(
                    s.topic, s.partition, s.first, s.last, AcknowledgeType.RENEW
                )
            await self.consumer.commit_sync()

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """RELEASE what was not accepted, leave the group, stop the loop."""
        try:
            self._renewer.cancel()
            self.loop.run(self._close(), timeout=30)
        except Exception as e:
            log.warning("closing the share consumer failed: %s", e)
        finally:
            self.loop.close()

    async def _close(self) -> None:
        async with self._lock:
            for b in self.batches.values():
                if not b.settled:
                    for s in b.spans:
                        self.consumer.acknowledge_range(
                            s.topic, s.partition, s.first, s.last, AcknowledgeType.RELEASE
                        )
            self.batches.clear()
            await self.consumer.close()
            await self._close_admin()


class _DrainWatch:
    """How long the group's start offsets have stood still."""

    def __init__(self) -> None:
        self.progress = -2
        self.since = time.monotonic()

    def stalled(self, progress: int) -> bool:
        if progress != self.progress:
            self.progress, self.since = progress, time.monotonic()
        return time.monotonic() - self.since > _DRAIN_PATIENCE_S


def _log_failures(results: AckResults) -> None:
    failed = {tp: code.name for tp, code in results.items() if code != 0}
    if failed:  # their locks were lost: they are delivered again (at-least-once)
        log.warning("acknowledging or renewing failed for %s", failed)


def _holds(spans: list[Span]) -> Any:
    by_tp: dict[tuple[str, int, int], list[Span]] = {}
    for s in spans:
        by_tp.setdefault((s.topic, s.partition, s.delivery_count), []).append(s)

    def held(key: RecordKey) -> bool:
        topic, partition, offset, dc = key
        return any(s.first <= offset <= s.last for s in by_tp.get((topic, partition, dc), ()))

    return held
