"""`spark.read.format("shoal")`: a topic's records by offsets or time, through a plain Fetch.

No share-group state is read or changed. Offsets are resolved once, when Spark plans the read
(`partitions()`, on the driver), with ListOffsets (see `spark.offsets` for the checks); each
Spark task then fetches one partition's range [start, end) from its leader. Options:
`kafka.bootstrap.servers`, `subscribe` / `subscribePattern` / `assign`, `startingOffsets` /
`endingOffsets` (`earliest`, `latest`, or JSON such as `{"t": {"0": 23, "1": -2}}` naming every
partition, with -2 for earliest and -1 for latest, as in Spark's Kafka source),
`startingTimestamp` (ms: the first offset at or after it in every partition),
`startingOffsetsByTimestamp` (JSON: a time per partition), `endingTimestamp` /
`endingOffsetsByTimestamp` (the read ends before the first record at or after the time),
`failOnDataLoss`, `includeHeaders`, `numPartitions` (tasks) or `minPartitions` (at least that
many tasks), `kafka.fetch.max.bytes` (bytes per Fetch), `kafka.isolation.level`
(`read_uncommitted`, the default of Spark's Kafka source, which leaves it to the Kafka consumer's
default; `read_committed`: "latest" is the last stable offset and the records of aborted
transactions are dropped) and the client's `kafka.*` settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.datasource import InputPartition

from spark.fetcher import Fetcher
from spark.fetcher import OffsetRange
from spark.fetcher import task_loop
from spark.options import BatchOptions
from spark.ranges import Span
from spark.ranges import split_spans
from spark.ranges import tasks_for
from spark.worker_gc import freeze_once


class RangePartition(InputPartition):
    def __init__(self, bootstrap: str, ranges: list[OffsetRange], max_bytes: int) -> None:
        super().__init__((bootstrap, ranges, max_bytes))


def split_ranges(ranges: list[OffsetRange], pieces: int | None) -> list[list[OffsetRange]]:
    """One task per partition (`pieces=None`), or `pieces` tasks of about as many offsets."""
    spans = [Span(r.topic, r.partition, r.start, r.end - 1, 0) for r in ranges]
    return [
        [OffsetRange(s.topic, s.partition, s.first, s.last + 1) for s in piece]
        for piece in split_spans(spans, pieces)
    ]


def read_ranges(
    bootstrap: str, ranges: list[OffsetRange], max_bytes: int, opts: BatchOptions
) -> Iterator[Any]:
    """Arrow batches of the records of `ranges`, one per Fetch round."""
    with task_loop() as loop:
        fetcher = Fetcher(
            bootstrap,
            client_id=opts.client_id,
            security=opts.security,
            isolation_level=opts.isolation_level,
        )
        try:
            yield from fetcher.arrow_ranges(
                loop, [(r, None) for r in ranges], max_bytes, include_headers=opts.include_headers
            )
        finally:
            loop.run_until_complete(fetcher.close())


class ShoalBatchReader(DataSourceReader):
    def __init__(self, opts: BatchOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        # Imported here: the tasks that unpickle this reader only fetch, and need no admin.
        from spark.offsets import plan

        ranges = asyncio.run(plan(self.opts))  # planning is one call on the driver
        pieces = tasks_for(len(ranges), self.opts.num_partitions, self.opts.min_partitions)
        return [
            RangePartition(self.opts.bootstrap, piece, self.opts.max_partition_bytes)
            for piece in split_ranges(ranges, pieces)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        freeze_once()  # see spark.worker_gc
        if partition.value is None:  # PySpark's placeholder when there is nothing to read
            return iter(())
        bootstrap, ranges, max_bytes = partition.value
        return read_ranges(bootstrap, ranges, max_bytes, self.opts)
