"""`spark.readStream.format("shoal")`: a share group as a Structured Streaming source.

Design: the driver owns the share consumer
-----------------------------------------
KIP-932 lets only the member that acquired a record acknowledge it; Spark commits a micro-batch
on the driver, after the executors have read it. So the records of a batch must be acquired,
kept alive and acknowledged by one long-lived member that learns when the batch is committed:
the stream reader object, which PySpark keeps in one Python process on the driver for the whole
query (`python_streaming_source_runner`), calling `latestOffset`, `partitions`, `commit` and
`stop` on it in turn.

- `latestOffset` acquires up to the read limit (`maxRecordsPerTrigger`) from the group with a
  `ShareConsumer` in explicit mode, keeps them under a new offset `{"seq": n}` and returns it.
- `partitions` hands the records themselves to the executors, as picklable column lists split
  into `numPartitions` pieces (by default one per Kafka partition); `read` only turns them into
  an Arrow batch: it is stateless and needs no connection.
- While a batch is planned or running, a task on the reader's private event loop RENEWs the
  locks of its records every third of the lock duration, so a slow batch keeps them.
- A batch is ACCEPTed once Spark has committed it. Spark asks a source for its next offset only
  after writing the previous batch to the commit log (and calls `commit` even later, when the
  next batch is planned, or never if none is), so `latestOffset(start)` accepts every batch up
  to `start`, and `commit(end)` does the same for completeness. Records that `shoal_ack` marked
  in `foreachBatch` are REJECTed or RELEASEd instead (see `spark.acks`).
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
at least twice). The cost of the driver design is that records pass through the driver; the
read limit bounds that per batch.

Options (see `spark.options`): `kafka.bootstrap.servers` (or `bootstrap.servers`) and the
client's other `kafka.*` settings (security included), `subscribe` or `subscribePattern`
(matched when the query starts: a share group subscribes by names), `group`,
`maxRecordsPerTrigger` (or `maxOffsetsPerTrigger`), `minOffsetsPerTrigger` / `maxTriggerDelay`
(see `spark.group_state`), `numPartitions`, `includeHeaders`, `acknowledgementMode`
(`at-least-once`, the default, or `at-most-once`: accept when the batch is planned), `ackDir`,
`pollTimeoutMs` (how long one trigger waits for records, default 1000), `renewIntervalMs`,
`maxRecordsPerBatch` (a cap when Spark asks for all available records, default 1,000,000).
`failOnDataLoss` is accepted for Spark's sake and changes nothing: records that retention
removes before the group reads them are skipped by the broker, as for any share consumer.

`Trigger.AvailableNow` is supported (`SupportsTriggerAvailableNow`): when it starts, the
reader notes each subscribed partition's end offset, and the run ends once a poll brings no
record below those ends (records produced later that arrive in the same poll are processed, not
released, since releasing would cost them a delivery attempt).
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
from client.records import ConsumerRecord
from client.share_acks import AcknowledgeType
from client.share_consumer import ShareConsumer
from spark.acks import RecordKey
from spark.acks import take_verdicts
from spark.group_state import StreamChecks
from spark.loop import LoopThread
from spark.offsets import pattern_topics
from spark.options import AT_MOST_ONCE
from spark.options import StreamOptions
from spark.rows import Columns
from spark.rows import without_headers

log = logging.getLogger(__name__)

_FETCH_MAX_RECORDS = 10_000  # MaxRecords of one ShareFetch
_ARROW_CHUNK = 20_000  # rows per Arrow batch out of read()
_JOIN_TIMEOUT_S = 30.0
_TICK_S = 0.1


class RecordsPartition(InputPartition):
    """The records of one Spark task, as columns."""

    def __init__(self, columns: Columns) -> None:
        super().__init__(columns)

    @property
    def columns(self) -> Columns:
        value: Columns = self.value
        return value

    def __repr__(self) -> str:
        return f"RecordsPartition({len(self.value)} records)"


def _key(r: ConsumerRecord) -> RecordKey:
    return (r.topic, r.partition, r.offset, r.delivery_count)


@dataclass
class _Batch:
    seq: int
    records: list[ConsumerRecord]
    settled: bool = False


class ShareGroupSession:
    """The driver-side member: a ShareConsumer on a private loop, the batches it holds, and
    the task that renews their locks. Every method is called from Spark's (one) thread."""

    def __init__(self, opts: StreamOptions) -> None:
        self.opts = opts
        self.loop = LoopThread("shoal-share-reader")
        self.consumer = ShareConsumer(
            opts.bootstrap,
            opts.group,
            acknowledgement_mode="explicit",
            max_records=_FETCH_MAX_RECORDS,
            client_id=opts.client_id,
            security=opts.security,
        )
        self.consumer.subscribe(opts.topics)
        self.batches: dict[int, _Batch] = {}
        self.available_now = False
        self.targets: dict[tuple[str, int], int] = {}
        self.drained = False
        self._touched = time.monotonic()
        self._lock = self.loop.run(self._make_lock())
        self._renewer = self.loop.spawn(self._renew_forever())

    @staticmethod
    async def _make_lock() -> asyncio.Lock:
        return asyncio.Lock()

    # -- acquiring ----------------------------------------------------------------------------

    def acquire(self, limit: int) -> list[ConsumerRecord]:
        return self.loop.run(self._acquire(limit))

    async def _acquire(self, limit: int) -> list[ConsumerRecord]:
        loop = asyncio.get_running_loop()
        timeout = self.opts.poll_timeout_ms / 1000
        deadline = loop.time() + timeout
        join_deadline = loop.time() + _JOIN_TIMEOUT_S
        out: list[ConsumerRecord] = []
        async with self._lock:
            while len(out) < limit:
                assigned = bool(self.consumer.assignment)
                self.consumer.max_records = max(1, min(limit - len(out), _FETCH_MAX_RECORDS))
                wait = 0.0 if out else max(0.0, deadline - loop.time())
                records = await self.consumer.poll(wait)
                if records:
                    out.extend(records)
                    self._touched = time.monotonic()
                    continue
                if out:
                    break
                if loop.time() < deadline:
                    continue
                if self.available_now and not assigned and loop.time() < join_deadline:
                    # Still joining: under AvailableNow an empty poll must mean "drained".
                    deadline = loop.time() + timeout
                    continue
                break
        if self.available_now and not self._below_targets(out):
            self.drained = bool(self.consumer.assignment)
        return out

    def _below_targets(self, records: list[ConsumerRecord]) -> bool:
        return any(r.offset < self.targets.get((r.topic, r.partition), 1 << 62) for r in records)

    def prepare_available_now(self) -> None:
        self.available_now = True
        self.targets = self.loop.run(self._end_offsets())

    async def _end_offsets(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        async with Admin(
            self.opts.bootstrap, client_id="shoal-spark-admin", security=self.opts.security
        ) as admin:
            for topic in self.opts.topics:
                info = await admin.cluster.topic(topic)
                for p in info.partitions:
                    out[(topic, p)] = await admin.list_offsets(topic, p, "latest")
        return out

    # -- acknowledging ------------------------------------------------------------------------

    def hold(self, seq: int, records: list[ConsumerRecord]) -> None:
        batch = self.batches[seq] = _Batch(seq, records)
        if self.opts.ack_mode == AT_MOST_ONCE:
            self.loop.run(self._settle([batch], verdicts=False))

    def settle_through(self, seq: int) -> None:
        """Spark committed every batch up to `seq`: acknowledge them and forget them."""
        done = [b for s, b in sorted(self.batches.items()) if s <= seq]
        if not done:
            return
        self.loop.run(self._settle([b for b in done if not b.settled], verdicts=True))
        for b in done:
            del self.batches[b.seq]

    async def _settle(self, batches: list[_Batch], *, verdicts: bool) -> None:
        records = [r for b in batches for r in b.records]
        if not records:
            return
        found: dict[RecordKey, AcknowledgeType] = {}
        if verdicts:
            found = take_verdicts(self.opts.ack_dir, {_key(r): r for r in records})
        async with self._lock:
            for r in records:
                self.consumer.acknowledge(r, found.get(_key(r), AcknowledgeType.ACCEPT))
            results = await self.consumer.commit_sync()
        for b in batches:
            b.settled = True
        failed = {tp: code.name for tp, code in results.items() if code != 0}
        if failed:  # their locks were lost: they are delivered again (at-least-once)
            log.warning("acknowledging %d records failed for %s", len(records), failed)
        if found:
            log.info("batch verdicts: %d rejected or released", len(found))

    def pending_after(self, seq: int) -> int | None:
        """The highest batch planned after `seq` and not yet committed, if any."""
        later = [s for s in self.batches if s > seq]
        return max(later) if later else None

    def records_between(self, start: int, end: int) -> list[ConsumerRecord]:
        return [r for s, b in sorted(self.batches.items()) if start < s <= end for r in b.records]

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
            held = [r for b in self.batches.values() if not b.settled for r in b.records]
            if not held:
                return
            for r in held:
                self.consumer.acknowledge(r, AcknowledgeType.RENEW)
            results = await self.consumer.commit_sync()
        failed = {tp: code.name for tp, code in results.items() if code != 0}
        if failed:
            log.warning("renewing %d record locks failed for %s", len(held), failed)

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
                    for r in b.records:
                        self.consumer.acknowledge(r, AcknowledgeType.RELEASE)
            self.batches.clear()
            await self.consumer.close()


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


def split(records: list[ConsumerRecord], pieces: int | None) -> list[Columns]:
    """One piece per Kafka partition (`pieces=None`), or `pieces` slices of similar size."""
    records = sorted(records, key=lambda r: (r.topic, r.partition, r.offset))
    if pieces is None:
        by_tp: dict[tuple[str, int], Columns] = {}
        for r in records:
            by_tp.setdefault((r.topic, r.partition), Columns()).append(r)
        return list(by_tp.values())
    n = min(pieces, len(records))
    size, extra = divmod(len(records), n) if n else (0, 0)
    out: list[Columns] = []
    start = 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(Columns.of(records[start:end]))
        start = end
    return out


def arrow_batches(columns: Columns) -> Iterator[Any]:
    """`columns` as Arrow record batches of at most `_ARROW_CHUNK` rows."""
    if len(columns) <= _ARROW_CHUNK:
        if len(columns):
            yield columns.to_arrow()
        return
    for lo in range(0, len(columns), _ARROW_CHUNK):
        hi = lo + _ARROW_CHUNK
        yield Columns(
            columns.key[lo:hi],
            columns.value[lo:hi],
            columns.topic[lo:hi],
            columns.partition[lo:hi],
            columns.offset[lo:hi],
            columns.timestamp_ms[lo:hi],
            columns.timestamp_type[lo:hi],
            columns.headers[lo:hi],
            columns.delivery_count[lo:hi],
        ).to_arrow()


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
        group.settle_through(seq)  # Spark wrote batches up to `start` to its commit log
        planned = group.pending_after(seq)
        if planned is not None:  # planned earlier but never run: offer it again
            return {"seq": planned}
        if group.drained:
            self.checks.drained()
            return start
        if not self.checks.may_plan():  # minOffsetsPerTrigger not reached yet
            return start
        if isinstance(limit, ReadMaxRows):
            wanted = limit.max_rows
        else:
            wanted = self.opts.max_records_per_batch
        records = group.acquire(wanted)
        if not records:
            if group.drained:
                self.checks.drained()
            return start
        self.checks.planned(len(records))
        group.hold(seq + 1, records)
        return {"seq": seq + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        group = self._group()
        records = group.records_between(int(start.get("seq", 0)), int(end.get("seq", 0)))
        # A batch replayed after a restart has no records here: they went back to the group.
        return [RecordsPartition(c) for c in split(records, self.opts.num_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, RecordsPartition)
        batches = arrow_batches(partition.columns)
        return batches if self.opts.include_headers else without_headers(batches)

    def commit(self, end: dict[str, int]) -> None:
        if self._session is not None:
            self._session.settle_through(int(end.get("seq", 0)))

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
