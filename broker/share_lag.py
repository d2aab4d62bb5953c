"""Share-group lag and the age of the oldest available record, as Prometheus families.

The numbers come from `broker.lag_readings` (computed on the event loop with
`broker.share.lag`, the functions DescribeShareGroupOffsets answers with). Series are per
(group, topic, partition), capped: the `max_series` with the most lag are exported (and
the `max_series` with the oldest records for the age), how many were left out is a gauge,
and the first scrape that leaves some out logs it once.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from prometheus_client.core import GaugeMetricFamily

MAX_SERIES = 1000
log = structlog.get_logger("shoal.metrics")


@dataclass(frozen=True, slots=True)
class ShareReading:
    """One share-partition as a scrape sees it."""

    group: str
    topic: str
    partition: int
    lag: int  # data records of [SPSO, log end) not acknowledged or archived
    oldest_age_s: float  # how long its oldest available record has waited; 0: none waits
    delayed: int = 0  # of the lag, available records that wait (retry backoff, schedules)


class ShareLagFamilies:
    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self._max_series = max_series
        self._warned = False

    def collect(self, rows: Sequence[ShareReading]) -> Iterator[GaugeMetricFamily]:
        top = heapq.nlargest(self._max_series, rows, key=lambda r: (r.lag, r.group, r.topic))
        omitted = len(rows) - len(top)
        if omitted and not self._warned:
            self._warned = True
            log.warning(
                "share lag series capped; the partitions with the least lag are left out",
                cap=self._max_series, omitted=omitted,
            )  # fmt: skip
        labels = ["group", "topic", "partition"]
        family = GaugeMetricFamily(
            "kafka_sharegroup_lag",
            "Data records from SPSO to the log end (the LSO for read_committed groups) not yet "
            f"acknowledged or archived, per share-partition (the {self._max_series} with the "
            "most lag).",
            labels=labels,
        )
        for r in top:
            family.add_metric([r.group, r.topic, str(r.partition)], r.lag)
        yield family
        sums: dict[str, int] = {}
        for r in rows:
            sums[r.group] = sums.get(r.group, 0) + r.lag
        total = GaugeMetricFamily(
            "kafka_sharegroup_lag_sum", "Share lag summed over a group's share-partitions.",
            labels=["group"],
        )  # fmt: skip
        for group, lag in heapq.nlargest(self._max_series, sums.items(), key=lambda kv: kv[1]):
            total.add_metric([group], lag)
        yield total
        delayed = GaugeMetricFamily(
            "shoal_sharegroup_delayed_records",
            "Of kafka_sharegroup_lag, the available records that may not be delivered yet "
            "(retry backoff, scheduled delivery), per share-partition (those with any; "
            f"at most {self._max_series}).",
            labels=labels,
        )
        waiting = [r for r in rows if r.delayed]
        for r in heapq.nlargest(self._max_series, waiting, key=lambda r: r.delayed):
            delayed.add_metric([r.group, r.topic, str(r.partition)], r.delayed)
        yield delayed
        yield GaugeMetricFamily(
            "shoal_sharegroup_lag_series_omitted",
            "Share-partitions left out of kafka_sharegroup_lag by its series cap.",
            value=omitted,
        )
        age = GaugeMetricFamily(
            "kafka_sharegroup_oldest_available_age_seconds",
            "How long the oldest record available to the group has waited since its timestamp "
            "(0: none waits), per share-partition (the oldest "
            f"{self._max_series}).",
            labels=labels,
        )
        oldest = heapq.nlargest(self._max_series, rows, key=lambda r: r.oldest_age_s)
        for r in oldest:
            age.add_metric([r.group, r.topic, str(r.partition)], r.oldest_age_s)
        yield age
