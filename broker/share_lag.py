"""Share-group lag for Prometheus, read at scrape time from the loaded share-partitions.

A share-partition's lag is what its group still has to finish: the records from SPSO to the
log end that are not yet delivery-complete (acknowledged or archived), i.e. KIP-1226's
`log end - SPSO - delivery-complete records in the window`. It counts acquired records too:
they are not done until acknowledged. Control batches past SPEO (transaction markers, share
state) count until a fetch steps over them: they are not read here (no decoding). Series
are per (group, topic, partition), capped: the `max_series` with the most lag are exported,
how many were left out is a gauge, and the first scrape that leaves some out logs it once.
The scrape runs in the metrics thread over a copy of the partition list.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import Protocol

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

MAX_SERIES = 1000
log = structlog.get_logger("shoal.metrics")


class LaggingPartition(Protocol):
    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def speo(self) -> int: ...

    def open_records(self) -> int: ...


# topic id, partition -> (topic name, log end offset), or None once the topic is gone
LogEnd = Callable[[uuid.UUID, int], tuple[str, int] | None]


def share_lag(sp: LaggingPartition, log_end: int) -> int:
    """Records of [SPSO, log end) not delivery-complete: beyond SPEO nothing is, and inside
    the window the open (available or acquired) ones."""
    return max(log_end - sp.speo, 0) + sp.open_records()


class ShareLagCollector(Collector):
    def __init__(
        self,
        partitions: Callable[[], Sequence[LaggingPartition]],
        log_end: LogEnd,
        max_series: int = MAX_SERIES,
    ) -> None:
        self._partitions = partitions
        self._log_end = log_end
        self._max_series = max_series
        self._warned = False

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lags: list[tuple[int, str, str, int]] = []
        for sp in self._partitions():
            found = self._log_end(sp.topic_id, sp.partition)
            if found is not None:
                lags.append((share_lag(sp, found[1]), sp.group_id, found[0], sp.partition))
        top = heapq.nlargest(self._max_series, lags)
        omitted = len(lags) - len(top)
        if omitted and not self._warned:
            self._warned = True
            log.warning(
                "share lag series capped; the partitions with the least lag are left out",
                cap=self._max_series, omitted=omitted,
            )  # fmt: skip
        family = GaugeMetricFamily(
            "kafka_sharegroup_lag",
            f"Records from SPSO to the log end not yet acknowledged or archived, per share-"
            f"partition (the {self._max_series} with the most lag).",
            labels=["group", "topic", "partition"],
        )
        sums: dict[str, int] = {}
        for lag, group, topic, partition in top:
            family.add_metric([group, topic, str(partition)], lag)
        for lag, group, _, _ in lags:
            sums[group] = sums.get(group, 0) + lag
        yield family
        total = GaugeMetricFamily(
            "kafka_sharegroup_lag_sum", "Share lag summed over a group's loaded share-partitions.",
            labels=["group"],
        )  # fmt: skip
        for group, lag in heapq.nlargest(self._max_series, sums.items(), key=lambda kv: kv[1]):
            total.add_metric([group], lag)
        yield total
        yield GaugeMetricFamily(
            "shoal_sharegroup_lag_series_omitted",
            "Share-partitions left out of kafka_sharegroup_lag by its series cap.",
            value=omitted,
        )
