"""Consumer-group lag for Prometheus: committed offset against log end, read at scrape time.

The names are kafka_exporter's (`kafka_consumergroup_lag_sum{consumergroup}`), which
dashboards for Kafka already use. Groups are a label, so their number is bounded: the
`MAX_GROUPS` groups with the largest lag are exported, and how many were left out is a gauge
of its own (and a log line when the cap starts to leave groups out). A scrape runs in the
metrics thread: it reads copies of the live maps.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = structlog.get_logger("shoal.metrics")

MAX_GROUPS = 100
# (group, topic, partition, committed offset) of every committed offset.
Committed = Callable[[], Iterable[tuple[str, str, int, int]]]
LogEnd = Callable[[str, int], int | None]


def lag_by_group(committed: Iterable[tuple[str, str, int, int]], log_end: LogEnd) -> dict[str, int]:
    """Each group's lag summed over its partitions (a partition past its log end counts 0)."""
    out: dict[str, int] = {}
    for group, topic, partition, offset in committed:
        end = log_end(topic, partition)
        out[group] = out.get(group, 0) + (max(end - offset, 0) if end is not None else 0)
    return out


class GroupLagCollector(Collector):
    def __init__(self, committed: Committed, log_end: LogEnd, max_groups: int = MAX_GROUPS) -> None:
        self._committed = committed
        self._log_end = log_end
        self._max_groups = max_groups
        self._capped = False  # logged once each time the cap starts to bite

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lags = lag_by_group(self._committed(), self._log_end)
        top = heapq.nlargest(self._max_groups, lags.items(), key=lambda kv: (kv[1], kv[0]))
        family = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            f"Records between a consumer group's committed offsets and the log ends (the "
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
