"""Transaction metrics for Prometheus, read at scrape time (the metrics thread): transactional
ids by state, as the coordinator holds them (`kafka_server_transaction_coordinator_transactions`,
one series per state, all six from the start), and, for each partition with an open
transaction, how far its last stable offset is behind its log end (`kafka_log_lso_lag`): what
read_committed consumers cannot read yet. A partition whose LSO lag only grows holds a
transaction that nothing ends (see `shoal transactions find-hanging`). Series are capped at the
`max_series` partitions with the most lag; how many were left out is a gauge of its own.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coordinator.txn_metadata import TxnState
from protocol.transaction_log import TransactionRecord
from storage.log import PartitionLog

MAX_SERIES = 1000


class TransactionCollector(Collector):
    def __init__(
        self,
        txns: Callable[[], Sequence[TransactionRecord]],
        logs: Callable[[], Sequence[tuple[tuple[str, int], PartitionLog]]],
        max_series: int = MAX_SERIES,
    ) -> None:
        self._txns = txns
        self._logs = logs
        self._max_series = max_series

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys((s.value for s in TxnState), 0)
        for m in self._txns():
            counts[m.state] = counts.get(m.state, 0) + 1
        by_state = GaugeMetricFamily(
            "kafka_server_transaction_coordinator_transactions",
            "Transactional ids the coordinator holds, by the state of their transaction.",
            labels=["state"],
        )
        for state, n in counts.items():
            by_state.add_metric([state], n)
        yield by_state

        lags: list[tuple[int, str, int]] = []
        for (topic, partition), plog in self._logs():
            lag = plog.log_end_offset - plog.last_stable_offset
            if lag > 0:
                lags.append((lag, topic, partition))
        top = heapq.nlargest(self._max_series, lags)
        family = GaugeMetricFamily(
            "kafka_log_lso_lag",
            f"Log end offset minus last stable offset, per partition with an open transaction "
            f"(the {self._max_series} with the most lag).",
            labels=["topic", "partition"],
        )
        for lag, topic, partition in top:
            family.add_metric([topic, str(partition)], lag)
        yield family
        yield GaugeMetricFamily(
            "shoal_log_lso_lag_series_omitted",
            "Partitions with an open transaction left out of kafka_log_lso_lag by its cap.",
            value=len(lags) - len(top),
        )
