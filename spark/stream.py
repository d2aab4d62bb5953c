"""`spark.readStream.format("shoal")`: a share group as a Structured Streaming source.

Design: the driver owns the share consumer
-----------------------------------------
KIP-932 lets only the member that acquired a record acknowledge it; Spark commits a micro-batch
on the driver, after the executors have read it. So the records of a batch must be acquired,
kept alive and acknowledged by one long-lived member that learns when the batch is committed:
the stream reader object, which PySpark keeps in one Python process on the driver for the whole
query (`python_streaming_source_runner`), calling `latestOffset`, `partitions`, `commit` and
`stop` on it in turn.

- `latestOffset` acquires up to the read limit (`maxRecordsPerTrigger`, or Spark's spelling
  `maxOffsetsPerTrigger`) from the group with a `ShareConsumer` in explicit mode, polling until
  the limit is reached (whole stored batches: it may pass it by less than one) or two short
  polls bring nothing; it keeps the batch under a new offset `{"seq": n}` and returns it.
- The driver plans by ranges, never by records (`spark.ranges`): a batch is its acquired ranges
  `(partition, first, last, delivery count)` and the stored batches the ShareFetches brought,
  undecoded. `partitions` splits them into `numPartitions` tasks (by default one per Kafka
  partition), cutting only between stored batches; `read` decodes its share straight into
  Arrow on the executor (`client.arrow_batches`). With `dataPath=fetch` the tasks get only
  their ranges and fetch the records by offset themselves (see spark/__init__.py for why the
  default ships the bytes).
- While a batch is planned or running, a task on the reader's private event loop RENEWs its
  ranges every third of the lock duration, so a slow batch keeps them.
- A batch is ACCEPTed, range by range, once Spark has committed it. Spark asks a source for its
  next offset only after writing the previous batch to the commit log (and calls `commit` even
  later, when the next batch is planned, or never if none is), so `latestOffset(start)` accepts
  every batch up to `start`: the acknowledgements ride on the ShareFetch that acquires the next
  batch (one round trip, and the broker frees the locks before it acquires), or go alone when
  no fetch follows; `commit(end)` does the same for completeness. Records that `shoal_ack`
  marked in `foreachBatch` are carved out of the ranges and REJECTed or RELEASEd instead (see
  `spark.acks`).
- `stop` (query stopped or failed) RELEASEs what was not accepted and leaves the group: those
  records go to another member or to this query when it restarts, with a higher delivery count.
  A batch Spark replays after a restart (planned, not committed) comes back empty: its records
  were released, and replaying the same records is not something a share group can promise.
  This is at-least-once: a batch that Spark committed just before a stop, with no next trigger
  to accept it, is delivered again.

Executor-side consumers were the alternative: each task would join the group and acquire its
own records. But then the member that acquired a record is a task that is gone by the time the
driver commits, so it could not acknowledge after the commit: it would have to accept before
the sink wrote anything (at-most-once) or leave the records to time out (every record delivered
at least twice). The cost of the driver design is that the stored batches pass through the
driver (as bytes: about 0.2 us of driver CPU per record); the read limit bounds that per batch.

Options (see `spark.options`): `kafka.bootstrap.servers` (or `bootstrap.servers`) and the
client's other `kafka.*` settings (security included), `subscribe` or `subscribePattern`
(matched when the query starts: a share group subscribes by names), `group`,
`maxRecordsPerTrigger` (or `maxOffsetsPerTrigger`), `minOffsetsPerTrigger` / `maxTriggerDelay`
(see `spark.group_state`), `numPartitions`, `includeHeaders`, `acknowledgementMode`
(`at-least-once`, the default, or `at-most-once`: accept when the batch is planned), `ackDir`,
`pollTimeoutMs` (how long one trigger waits for records, default 1000), `renewIntervalMs`,
`maxRecordsPerBatch` (a cap when Spark asks for all available records, default 1,000,000),
`dataPath` (`ship`, the default, or `fetch`).
`failOnDataLoss` is accepted for Spark's sake and changes nothing: records that retention
removes before the group reads them are skipped by the broker, as for any share consumer.

`Trigger.AvailableNow` is supported (`SupportsTriggerAvailableNow`): when it starts, the
reader notes each subscribed partition's end offset, and the run ends once the group is
drained below them: no record below those ends is available or acquired by anyone in the group,
that is every share-partition's start offset (DescribeShareGroupOffsets) has reached its end.
So several queries (or other consumers) in one group share the work and each ends when all of
it is done; a query waits while others hold records, and gives up with a warning after
2 minutes in which the group made no progress. Records produced later that arrive in a poll
are processed, not released, since releasing would cost them a delivery attempt.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import replace
from types import FrameType
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from client.admin import Admin
from client.arrow_batches import acquired_to_arrow
from client.errors import KafkaError
from client.records import AcquiredData
from client.share_acks import AcknowledgeType
from client.share_consumer import AckResults
from client.share_consumer import ShareConsumer
from spark.acks import RecordKey
from spark.acks import take_verdicts
from spark.fetcher import Fetcher
from spark.fetcher import OffsetRange
from spark.fetcher import task_loop
from spark.group_state import StreamChecks
from spark.loop import LoopThread
from spark.offsets import pattern_topics
from spark.options import AT_MOST_ONCE
from spark.options import SHIP
from spark.options import StreamOptions
from spark.ranges import Shipment
from spark.ranges import Span
from spark.ranges import carve
from spark.ranges import count
from spark.ranges import shipments
from spark.ranges import spans_of
from spark.ranges import split_spans
from spark.rows import without_headers

log = logging.getLogger(__name__)

_TOP_UP_WAIT_S = 0.05  # once a batch has records, how long one more poll may wait for more
_TOP_UP_EMPTY_POLLS = 2  # ... and how many empty ones end it
_DRAIN_POLL_S = 0.2  # AvailableNow: how often an idle reader asks whether the group is drained
_DRAIN_PATIENCE_S = 120.0  # AvailableNow: give up waiting on the group after no progress
_FETCH_BYTES = 8 << 20  # per Fetch of a task that reads its ranges from the broker
_TICK_S = 0.1


class ShipmentPartition(InputPartition):
    """A task's stored batches, shipped by the driver, with the spans to read from them."""

    def __init__(self, pieces: list[Shipment]) -> None:
        super().__init__(pieces)

    def __repr__(self) -> str:
        return f"ShipmentPartition({sum(len(p.data) for p in self.value)} bytes)"


class SpanPartition(InputPartition):
    """A task's spans, which it fetches from the broker itself."""

    def __init__(self, bootstrap: str, spans: list[Span]) -> None:
        super().__init__((bootstrap, spans))

    def __repr__(self) -> str:
        return f"SpanPartition({sum(len(s) for s in self.value[1])} offsets)"


@dataclass
class _Batch:
    seq: int
    spans: list[Span]
    acquired: list[AcquiredData]  # kept only when the driver ships the bytes
    settled: bool = False


class ShareGroupSession:
    """The driver-side member: a ShareConsumer on a private loop, the batches it holds (as
    ranges), and the task that renews their locks. Every method is called from Spark's (one)
    thread; the consumer is only touched on the loop."""

    def __init__(self, opts: StreamOptions) -> None:
        self.opts = opts
        self.loop = LoopThread("shoal-share-reader")
        self.consumer = ShareConsumer(
            opts.bootstrap,
            opts.group,
            acknowledgement_mode="explicit",
            client_id=opts.client_id,
            security=opts.security,
            on_acknowledgement=_log_failures,
        )
        self.consumer.subscribe(opts.topics)
        self.batches: dict[int, _Batch] = {}
        self.available_now = False
        self.targets: dict[tuple[str, int], tuple[int, int]] = {}  # (earliest, end) at start
        self.drained = False
        self._admin: Admin | None = None
        self._touched = time.monotonic()
        self._lock = self.loop.run(self._make_lock())
        self._renewer = self.loop.spawn(self._renew_forever())

    @staticmethod
    async def _make_lock() -> asyncio.Lock:
        return asyncio.Lock()

    # -- acquiring ----------------------------------------------------------------------------

    def acquire(self, limit: int) -> list[AcquiredData]:
        return self.loop.run(self._acquire(limit))

    async def _acquire(self, limit: int) -> list[AcquiredData]:
        """Up to about `limit` records (whole stored batches), polling until the limit is
        reached or the group has no more for now; the first poll carries the acknowledgements
        that `settle_through` queued."""
        loop = asyncio.get_running_loop()
        timeout = self.opts.poll_timeout_ms / 1000
        deadline = loop.time() + timeout
        out: list[AcquiredData] = []
        got = empty = 0
        drain = _DrainWatch()
        async with self._lock:
            while got < limit:
                self.consumer.max_records = limit - got
                wait = _TOP_UP_WAIT_S if got else max(0.0, deadline - loop.time())
                if self.available_now and not got:
                    wait = min(wait, _DRAIN_POLL_S)
                acquired = await self.consumer.poll_acquired(wait)
                if acquired:
                    out.extend(acquired)
                    got += count(acquired)
                    self._touched = time.monotonic()
                    empty = 0
                    continue
                if got:
                    empty += 1
                    if empty >= _TOP_UP_EMPTY_POLLS:
                        break
                    continue
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

    async def _end_offsets(self) -> dict[tuple[str, int], tuple[int, int]]:
        admin = self._admin = Admin(
            self.opts.bootstrap, client_id="shoal-spark-admin", security=self.opts.security
        )
        await admin.cluster.bootstrap()
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for topic in self.opts.topics:
            info = await admin.cluster.topic(topic)
            for p in info.partitions:
                earliest = await admin.list_offsets(topic, p, "earliest")
                out[(topic, p)] = (earliest, await admin.list_offsets(topic, p, "latest"))
        return out

    async def _is_drained(self, watch: _DrainWatch | None) -> bool:
        """No record below the noted end offsets is available or acquired by anyone in the
        group: every share-partition's start offset (SPSO) has reached its end."""
        assert self._admin is not None
        wanted = [tp for tp, (lo, end) in self.targets.items() if end > lo]
        if not wanted:
            return True
        try:
            offsets = await self._admin.describe_share_group_offsets(self.opts.group, wanted)
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

    # -- acknowledging ------------------------------------------------------------------------

    def hold(self, seq: int, acquired: list[AcquiredData]) -> None:
        keep = acquired if self.opts.data_path == SHIP else []
        batch = self.batches[seq] = _Batch(seq, spans_of(acquired), keep)
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
            if send:
                await self.consumer.commit_sync()
        for b in batches:
            b.settled = True
        if found:
            log.info("batch verdicts: %d rejected or released", len(found))

    def pending_after(self, seq: int) -> int | None:
        """The highest batch planned after `seq` and not yet committed, if any."""
        later = [s for s in self.batches if s > seq]
        return max(later) if later else None

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
            if self._admin is not None:
                await self._admin.close()


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


def _stop_on_sigterm(reader: ShoalStreamReader) -> None:
    """Run `reader.stop()` when the process gets SIGTERM.

    Spark 4 ends the driver-side reader process by killing it (`PythonWorkerFactory.stopWorker`
    destroys the process: SIGTERM), so `stop()` would never run and unaccepted records would
    wait for their locks to expire. Installed only from the main thread and only over the
    default disposition.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if reader._stopping:
            return  # it interrupted stop(): let stop() finish, then the process ends anyway
        try:
            reader.stop()
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def read_shipment(pieces: list[Shipment]) -> Iterator[Any]:
    """Arrow batches of the spans of shipped stored batches (one pass per piece)."""
    for p in pieces:
        acquired = [(s.first, s.last, s.delivery_count) for s in p.spans]
        batch = acquired_to_arrow(p.data, topic=p.topic, partition=p.partition, acquired=acquired)
        if batch.num_rows:
            yield batch


def read_spans(bootstrap: str, spans: list[Span], opts: StreamOptions) -> Iterator[Any]:
    """Arrow batches of the records of `spans`, fetched by offset (one per Fetch)."""
    with task_loop() as loop:
        fetcher = Fetcher(bootstrap, client_id=opts.client_id, security=opts.security)
        try:
            ranges = [
                (OffsetRange(s.topic, s.partition, s.first, s.last + 1), s.delivery_count)
                for s in spans
            ]
            yield from fetcher.arrow_ranges(loop, ranges, _FETCH_BYTES)
        finally:
            loop.run_until_complete(fetcher.close())


class ShoalStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: StreamOptions) -> None:
        self.opts = opts
        # Made on first use: PySpark also builds (and pickles) a reader only to ship read().
        self._session: ShareGroupSession | None = None
        self._checks: StreamChecks | None = None
        self._stopping = False

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_session": None, "_checks": None, "_stopping": False}

    def _group(self) -> ShareGroupSession:
        if self._session is None:
            if self.opts.pattern is not None:  # a share group subscribes by names
                self.opts = replace(self.opts, topics=asyncio.run(pattern_topics(self.opts)))
            self._session = ShareGroupSession(self.opts)
            self._checks = StreamChecks(self.opts, self._session.loop)
            _stop_on_sigterm(self)
        return self._session

    @property
    def checks(self) -> StreamChecks:
        self._group()
        assert self._checks is not None
        return self._checks

    def initialOffset(self) -> dict[str, int]:
        return {"seq": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self.checks.prepare_available_now()
        self._group().prepare_available_now()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        group = self._group()
        seq = int(start.get("seq", 0))
        # Spark wrote batches up to `start` to its commit log: their acks ride the next poll.
        group.settle_through(seq, send=False)
        planned = group.pending_after(seq)
        if planned is not None:  # planned earlier but never run: offer it again
            group.flush()
            return {"seq": planned}
        if group.drained:
            group.flush()
            self.checks.drained()
            return start
        if not self.checks.may_plan():  # minOffsetsPerTrigger not reached yet
            return start
        if isinstance(limit, ReadMaxRows):
            wanted = limit.max_rows
        else:
            wanted = self.opts.max_records_per_batch
        acquired = group.acquire(wanted)
        if not acquired:
            if group.drained:
                self.checks.drained()
            return start
        self.checks.planned(count(acquired))
        group.hold(seq + 1, acquired)
        return {"seq": seq + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        batches = self._group().between(int(start.get("seq", 0)), int(end.get("seq", 0)))
        # A batch replayed after a restart has no ranges here: they went back to the group.
        pieces = self.opts.num_partitions
        if self.opts.data_path == SHIP:
            acquired = [a for b in batches for a in b.acquired]
            return [ShipmentPartition(p) for p in shipments(acquired, pieces)]
        spans = [s for b in batches for s in b.spans]
        return [SpanPartition(self.opts.bootstrap, p) for p in split_spans(spans, pieces)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, ShipmentPartition):
            batches = read_shipment(partition.value)
        else:
            assert isinstance(partition, SpanPartition)
            bootstrap, spans = partition.value
            batches = read_spans(bootstrap, spans, self.opts)
        return batches if self.opts.include_headers else without_headers(batches)

    def commit(self, end: dict[str, int]) -> None:
        if self._session is not None:
            self._session.settle_through(int(end.get("seq", 0)), send=True)

    def stop(self) -> None:
        session, self._session = self._session, None
        checks, self._checks = self._checks, None
        if session is not None:
            self._stopping = True
            try:
                if checks is not None:
                    checks.close()
                session.close()
            finally:
                self._stopping = False
