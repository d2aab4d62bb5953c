"""`spark.read.format("shoal")`: a topic's records by offsets or time, through a plain Fetch.

No share-group state is read or changed. Offsets are resolved once, when Spark plans the read
(`partitions()`, on the driver), with ListOffsets (see `spark.offsets` for the checks); each
Spark task then fetches one partition's range [start, end) from its leader. Options:
`kafka.bootstrap.servers`, `subscribe` / `subscribePattern` / `assign`, `startingOffsets` /
`endingOffsets` (`earliest`, `latest`, or JSON such as `{"t": {"0": 23, "1": -2}}` naming every
partition, with -2 for earliest and -1 for latest, as in Spark's Kafka source),
`startingTimestamp` (ms: the first offset at or after it in every partition),
`startingOffsetsByTimestamp` (JSON: a time per partition), `failOnDataLoss`, `includeHeaders`,
`kafka.fetch.max.bytes` (bytes per Fetch) and the client's `kafka.*` settings.
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
from spark.offsets import plan_ranges
from spark.options import BatchOptions
from spark.rows import Columns
from spark.rows import without_headers


class RangePartition(InputPartition):
    def __init__(self, bootstrap: str, offsets: OffsetRange, max_bytes: int) -> None:
        super().__init__((bootstrap, offsets, max_bytes))


async def plan(opts: BatchOptions) -> list[OffsetRange]:
    """The [start, end) range of every partition read (see `spark.offsets`)."""
    async with Admin(
        opts.bootstrap, client_id="shoal-spark-planner", security=opts.security
    ) as admin:
        return await plan_ranges(admin, opts)


def read_range(
    bootstrap: str, offsets: OffsetRange, max_bytes: int, opts: BatchOptions
) -> Iterator[Any]:
    """Arrow batches of the records of `offsets`, one per Fetch round."""
    with asyncio.Runner() as runner:  # one loop for the whole task, stepped between yields
        fetcher = Fetcher(bootstrap, client_id=opts.client_id, security=opts.security)
        try:
            offset = offsets.start
            while offset < offsets.end:
                rest = OffsetRange(offsets.topic, offsets.partition, offset, offsets.end)
                records, offset = runner.run(fetcher.read_round(rest, max_bytes))
                if records:
                    yield Columns.of(records, shared=False).to_arrow()
        finally:
            runner.run(fetcher.close())


class ShoalBatchReader(DataSourceReader):
    def __init__(self, opts: BatchOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        ranges = asyncio.run(plan(self.opts))  # planning is one call on the driver
        return [
            RangePartition(self.opts.bootstrap, r, self.opts.max_partition_bytes) for r in ranges
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if partition.value is None:  # PySpark's placeholder when there is nothing to read
            return iter(())
        bootstrap, offsets, max_bytes = partition.value
        batches = read_range(bootstrap, offsets, max_bytes, self.opts)
        return batches if self.opts.include_headers else without_headers(batches)
