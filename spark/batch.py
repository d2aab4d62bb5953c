"""`spark.read.format("shoal")`: a topic's records by offsets or time, through a plain Fetch.

No share-group state is read or changed. Offsets are resolved once, when Spark plans the read
(`partitions()`, on the driver), with ListOffsets; each Spark task then fetches one partition's
range [start, end) from its leader. Options: `kafka.bootstrap.servers`, `subscribe`,
`startingOffsets` / `endingOffsets` (`earliest`, `latest`, or JSON such as
`{"t": {"0": 23, "1": -2}}` with -2 for earliest and -1 for latest, as in Spark's Kafka
source), `startingTimestamp` (ms: the first offset at or after it in every partition), and
`fetch.max.bytes` (bytes per Fetch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.datasource import InputPartition

from client.admin import Admin
from spark.fetcher import Fetcher
from spark.fetcher import OffsetRange
from spark.fetcher import resolve_offset
from spark.fetcher import task_loop
from spark.options import BatchOptions
from spark.options import OffsetBound
from spark.ranges import Span
from spark.ranges import split_spans


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


def _spec(bound: OffsetBound, topic: str, partition: int, default: str) -> str | int:
    if isinstance(bound, str):
        return bound
    return bound.get(topic, {}).get(str(partition), default)


async def plan(opts: BatchOptions) -> list[OffsetRange]:
    """The [start, end) range of every partition of the subscribed topics."""
    out: list[OffsetRange] = []
    async with Admin(opts.bootstrap, client_id="shoal-spark-planner") as admin:
        for topic in opts.topics:
            info = await admin.cluster.topic(topic)
            for p in sorted(info.partitions):
                end = await resolve_offset(admin, topic, p, _spec(opts.ending, topic, p, "latest"))
                if opts.starting_timestamp is not None:
                    start = await admin.list_offsets(topic, p, opts.starting_timestamp)
                    start = end if start < 0 else start  # nothing at or after that time
                else:
                    spec = _spec(opts.starting, topic, p, "earliest")
                    start = await resolve_offset(admin, topic, p, spec)
                if start < end:
                    out.append(OffsetRange(topic, p, start, end))
    return out


def read_ranges(bootstrap: str, ranges: list[OffsetRange], max_bytes: int) -> Iterator[Any]:
    """Arrow batches of the records of `ranges`, one per Fetch round."""
    with task_loop() as loop:
        fetcher = Fetcher(bootstrap, client_id="shoal-spark-reader")
        try:
            for r in ranges:
                yield from fetcher.arrow_rounds(
                    loop, r.topic, r.partition, r.start, r.end, max_bytes
                )
        finally:
            loop.run_until_complete(fetcher.close())


class ShoalBatchReader(DataSourceReader):
    def __init__(self, opts: BatchOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        ranges = asyncio.run(plan(self.opts))  # planning is one call on the driver
        return [
            RangePartition(self.opts.bootstrap, piece, self.opts.max_partition_bytes)
            for piece in split_ranges(ranges, self.opts.num_partitions)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if partition.value is None:  # PySpark's placeholder when there is nothing to read
            return iter(())
        bootstrap, ranges, max_bytes = partition.value
        return read_ranges(bootstrap, ranges, max_bytes)
