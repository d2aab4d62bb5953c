"""`spark.readStream.format("shoal")`: a share group as a Structured Streaming source.

Design: the driver owns the share consumer
-----------------------------------------
KIP-932 lets only the member that acquired a record acknowledge it; Spark commits a micro-batch
on the driver, after the executors have read it. So the records of a batch must be acquired,
kept alive and acknowledged by one long-lived member that learns when the batch is committed:
the stream reader object, which PySpark keeps in one Python process on the driver for the whole
query (`python_streaming_source_runner`), calling `latestOffset`, `partitions`, `commit` and
`stop` on it in turn. That member is `spark.share_session.ShareGroupSession`, made on first
use and imported only there: Spark's tasks unpickle this reader too, and only decode.

- `latestOffset` acquires up to the read limit (`maxRecordsPerTrigger`, or Spark's spelling
  `maxOffsetsPerTrigger`) from the group with a `ShareConsumer` in explicit mode and KIP-1206's
  record_limit mode, so the limit is exact; the first poll waits up to `pollTimeoutMs`, the
  next ones take what is there until the limit or a poll that brings nothing. Redelivered
  records come one partition at a time in batches that shrink as their delivery count grows,
  so a failing batch never takes its good records to the delivery-count limit
  (`spark.redelivery`, `spark.acquire`). It keeps the batch under a new offset and returns it:
  the batch's number and, in Spark's Kafka shape, each partition's offset after the highest
  record read (`spark.progress`); `reportLatestOffset` gives the log end offsets (the LSOs at
  read_committed) and the source's metrics (offsets behind them, the group's lag) for the
  query's progress.
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
import os
import signal
import threading
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.streaming.datasource import ReadMaxRows
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from client.arrow_batches import acquired_to_arrow
from spark.options import SHIP
from spark.options import StreamOptions
from spark.progress import BATCH
from spark.progress import batch_of
from spark.progress import end_offset
from spark.progress import positions_of
from spark.ranges import Shipment
from spark.ranges import Span
from spark.ranges import count
from spark.ranges import shipments
from spark.ranges import split_spans
from spark.ranges import tasks_for
from spark.rows import without_headers
from spark.worker_gc import freeze_once

if TYPE_CHECKING:
    from spark.group_state import StreamChecks
    from spark.share_session import ShareGroupSession

_FETCH_BYTES = 8 << 20  # per Fetch of a task that reads its ranges from the broker


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
    from spark.fetcher import Fetcher
    from spark.fetcher import OffsetRange
    from spark.fetcher import task_loop

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
        self._last_end: dict[str, Any] = {}  # the offset latestOffset last returned

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_session": None, "_checks": None, "_stopping": False,
                "_last_end": {}}  # fmt: skip

    def _group(self) -> ShareGroupSession:
        if self._session is None:
            # Here, not at the top: a task that unpickles this reader only decodes.
            from spark.group_state import StreamChecks
            from spark.offsets import pattern_topics
            from spark.share_session import ShareGroupSession

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

    def initialOffset(self) -> dict[str, Any]:
        return {BATCH: 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self.checks.prepare_available_now()
        self._group().prepare_available_now()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        self._last_end = end = self._latest_offset(start, limit)
        return end

    def _latest_offset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        group = self._group()
        seq = batch_of(start)
        # Spark wrote batches up to `start` to its commit log: their acks ride the next poll.
        group.settle_through(seq, send=False)
        planned = group.pending_after(seq)
        if planned is not None:  # planned earlier but never run: offer it again
            group.flush()
            return planned
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
        read = ((a.topic, a.partition, r.last_offset) for a in acquired for r in a.ranges)
        end = end_offset(start, seq + 1, read)
        group.hold(seq + 1, acquired, end)
        return end

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """Each subscribed partition's log end offset (LSO: read_committed), and the source's
        metrics (offsets behind them, the group's lag) under `shoal:metrics`: see
        `spark.progress`."""
        if self._session is None:
            return None
        return self._session.latest_report(positions_of(self._last_end))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        batches = self._group().between(batch_of(start), batch_of(end))
        # A batch replayed after a restart has no ranges here: they went back to the group.
        spans = [s for b in batches for s in b.spans]
        kafka_partitions = len({(s.topic, s.partition) for s in spans})
        pieces = tasks_for(kafka_partitions, self.opts.num_partitions, self.opts.min_partitions)
        if self.opts.data_path == SHIP:
            acquired = [a for b in batches for a in b.acquired]
            return [ShipmentPartition(p) for p in shipments(acquired, pieces)]
        return [SpanPartition(self.opts.bootstrap, p) for p in split_spans(spans, pieces)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_once()  # see spark.worker_gc
        if isinstance(partition, ShipmentPartition):
            batches = read_shipment(partition.value)
        else:
            assert isinstance(partition, SpanPartition)
            bootstrap, spans = partition.value
            batches = read_spans(bootstrap, spans, self.opts)
        return batches if self.opts.include_headers else without_headers(batches)

    def commit(self, end: dict[str, Any]) -> None:
        if self._session is not None:
            self._session.settle_through(batch_of(end), send=True)

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
