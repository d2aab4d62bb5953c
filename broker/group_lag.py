"""Consumer-group lag: data records between a committed offset and the log end.

The metric names are kafka_exporter's (`kafka_consumergroup_lag_sum{consumergroup}`), which
dashboards for Kafka already use. Unlike kafka_exporter's `log end - committed`, only data
records count: share-state records and transaction markers after a group's last commit are
no backlog (Kafka's lag stays at 1 after a transaction's commit marker). Groups are a label,
so their number is bounded: the `max_groups` groups with the largest lag are exported, and how
many were left out is a gauge of its own (and a log line when the cap starts to leave groups
out). The numbers come from `broker.lag_readings`, computed on the event loop.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from collections.abc import Mapping

import structlog
from prometheus_client.core import GaugeMetricFamily

from storage.log import PartitionLog

log = structlog.get_logger("shoal.metrics")

MAX_GROUPS = 100


def consumer_lag(plog: PartitionLog, committed: int) -> int:
    """Data records from a committed offset to the log end (0 at or past the end)."""
    return plog.data_records(committed, plog.log_end_offset)


class GroupLagFamilies:
    def __init__(self, max_groups: int = MAX_GROUPS) -> None:
        self._max_groups = max_groups
        self._capped = False  # logged once each time the cap starts to bite

    def collect(self, lags: Mapping[str, int]) -> Iterator[GaugeMetricFamily]:
        top = heapq.nlargest(self._max_groups, lags.items(), key=lambda kv: (kv[1], kv[0]))
        family = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            f"Data records between a consumer group's committed offsets and the log ends (the "
            f"{self._max_groups} groups with the most lag).",
            labels=["consumergroup"],
        )
        for group, lag in top:
            family.add_metric([group], lag)
        yield family
        omitted = len(lags) - len(top)
        if omitted and not self._capped:
            log.warning("consumer-group lag metric capped", groups=len(lags),
                        exported=len(top), omitted=omitted)  # fmt: skip
        self._capped = omitted > 0
        yield GaugeMetricFamily(
            "shoal_consumergroup_lag_groups_omitted",
            "Consumer groups with committed offsets left out of kafka_consumergroup_lag_sum.",
            value=omitted,
        )
