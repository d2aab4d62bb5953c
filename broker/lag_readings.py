"""What a scrape reads of the broker's partitions, computed on the event loop: share lag and
the age of the oldest available record per share-partition, consumer-group lag, and log size
per partition.

Computed in slices of `SLICE` items with the loop free between them (`LoopReadings` hands the
result to the metrics thread). A share-partition's lag is `broker.share.lag.share_lag`, the
function DescribeShareGroupOffsets answers with; a committed offset's lag is
`broker.group_lag.consumer_lag`. Both count data records only, subtracted by range.

The age of the oldest available record is now minus the timestamp in the header of the batch
holding it (`BatchHeader.timestamp`: the batch's base timestamp, or its append time on a
LogAppendTime topic; never a decoded record). It is the record's age, not how long it has been
available again: a record released or timed out twice still counts from when it was produced,
as SQS counts ApproximateAgeOfOldestMessage from when a message was sent. A header is read
only when a share-partition's oldest available offset moves. A producer clock ahead of the
broker's gives 0, never a negative age.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.group_lag import GroupLagFamilies
from broker.group_lag import consumer_lag
from broker.share.lag import oldest_available_offset
from broker.share.lag import share_lag
from broker.share.share_logs import ShareLogs
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share_lag import ShareLagFamilies
from broker.share_lag import ShareReading
from storage.log import PartitionLog

SLICE = 256  # items computed between two yields to the loop (a few ms)


@dataclass(frozen=True, slots=True)
class LagReadings:
    share: tuple[ShareReading, ...] = ()
    consumer: tuple[tuple[str, int], ...] = ()  # (group, lag summed over its partitions)
    log_sizes: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, bytes)


async def learn_non_data(plog: PartitionLog) -> None:
    """Complete the log's non-data ranges (`PartitionLog.learn_non_data`: nothing to do but
    for a segment sealed before they were kept, walked once), the loop free between slices."""
    for _ in plog.learn_non_data():
        await asyncio.sleep(0)


class LagReader:
    def __init__(
        self,
        logs: ShareLogs,
        share_partitions: Callable[[], Sequence[SharePartition]],
        committed: Callable[[], Iterable[tuple[str, str, int, int]]],
        partition_logs: Callable[[], Sequence[tuple[tuple[str, int], PartitionLog]]],
        now_ms: Callable[[], int],
    ) -> None:
        self._logs = logs
        self._share_partitions = share_partitions
        self._committed = committed
        self._partition_logs = partition_logs
        self._now_ms = now_ms
        # Per share-partition: its oldest available offset and that batch's timestamp.
        self._stamps: dict[SharePartitionKey, tuple[int, int]] = {}

    async def read(self) -> LagReadings:
        share = await self._share()
        consumer = await self._consumer()
        sizes = []
        for i, ((topic, partition), plog) in enumerate(self._partition_logs(), 1):
            sizes.append((topic, partition, plog.size_bytes))
            if i % SLICE == 0:
                await asyncio.sleep(0)
        return LagReadings(tuple(share), tuple(consumer.items()), tuple(sizes))

    async def _share(self) -> list[ShareReading]:
        out: list[ShareReading] = []
        stamps: dict[SharePartitionKey, tuple[int, int]] = {}
        for i, sp in enumerate(self._share_partitions(), 1):
            if i % SLICE == 0:
                await asyncio.sleep(0)
            topic = self._logs.topic_by_id(sp.topic_id)
            plog = self._logs.log(topic.name, sp.partition) if topic else None
            if topic is None or plog is None:
                continue
            await learn_non_data(plog)
            lag, age = share_lag(sp, plog), self._age(sp, plog, stamps)
            delayed = sp.delayed_count(self._now_ms())
            out.append(ShareReading(sp.group_id, topic.name, sp.partition, lag, age, delayed))
        self._stamps = stamps
        return out

    def _age(
        self,
        sp: SharePartition,
        plog: PartitionLog,
        stamps: dict[SharePartitionKey, tuple[int, int]],
    ) -> float:
        offset = oldest_available_offset(sp, plog)
        if offset is None:
            return 0.0
        known = self._stamps.get(sp.key)
        if known is None or known[0] != offset:
            timestamp = plog.batch_timestamp(offset)
            if timestamp is None:
                return 0.0
            known = (offset, timestamp)
        stamps[sp.key] = known
        return max(self._now_ms() - known[1], 0) / 1000

    async def _consumer(self) -> dict[str, int]:
        lags: dict[str, int] = {}
        for i, (group, topic, partition, offset) in enumerate(self._committed(), 1):
            if i % SLICE == 0:
                await asyncio.sleep(0)
            plog = self._logs.log(topic, partition)
            lags.setdefault(group, 0)
            if plog is None or offset < 0:
                continue
            await learn_non_data(plog)
            lag = consumer_lag(plog, offset)
            lags[group] = lags.get(group, 0) + lag
        return lags


class LagCollector(Collector):
    """The families read from one `LagReadings` per scrape."""

    def __init__(self, read: Callable[[], LagReadings]) -> None:
        self._read = read
        self._share = ShareLagFamilies()
        self._groups = GroupLagFamilies()

    def collect(self) -> Iterator[Metric]:
        readings = self._read()
        yield from self._share.collect(readings.share)
        yield from self._groups.collect(dict(readings.consumer))
        size = GaugeMetricFamily(
            "kafka_log_log_size",
            "Size: bytes of a partition's segment files (kafka.log:type=Log,name=Size).",
            labels=["topic", "partition"],
        )
        for topic, partition, n in readings.log_sizes:
            size.add_metric([topic, str(partition)], n)
        yield size
