"""Prometheus metrics, on a registry of the broker's own (several test brokers share a process).

Names follow the JMX names an operator of Kafka knows, lower-cased the way the Prometheus JMX
exporter writes them: KIP-932/KIP-1222's `kafka.server:type=ShareGroupMetrics,
name=RecordAcknowledgementsPerSec,ackType=...` is
`kafka_server_sharegroupmetrics_recordacknowledgementspersec_total{ackType="Accept"}` (a
counter: Prometheus derives the per-second rate). Labels are bounded: API names, error codes,
ack types, never member ids, offsets or groups.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping

from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import Histogram
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.share.record_state import AcknowledgeType

ACK_TYPE_NAMES = {1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}
SHARE = "kafka_server_sharegroupmetrics"
COORDINATOR = "kafka_server_groupcoordinatormetrics"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        # Requests (kafka.network:type=RequestMetrics).
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by API.",
            ["request"],
            registry=r,
        )
        self.errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Responses carrying a top-level error code, by API and error.",
            ["request", "error"],
            registry=r,
        )
        self.latency = Histogram(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its response being queued, by API.",
            ["request"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        # Children of `requests` and `latency` by API: a label lookup per request is dear.
        self._request_children: dict[str, tuple[Counter, Histogram]] = {}
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Request bytes received.", registry=r
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Response bytes sent.", registry=r
        )
        # Share groups (KIP-932, KIP-1103, KIP-1222).
        self.record_acks = Counter(
            f"{SHARE}_recordacknowledgementspersec",
            "RecordAcknowledgementsPerSec: records acknowledged, by acknowledgement type.",
            ["ackType"],
            registry=r,
        )
        # Children bound once (each shown at 0 from the start): acks are counted per request.
        self._record_acks_by_type = {
            ack_type: self.record_acks.labels(ackType=name)
            for ack_type, name in ACK_TYPE_NAMES.items()
        }
        self.share_acks = Counter(
            f"{SHARE}_shareacknowledgementpersec",
            "ShareAcknowledgement: acknowledgement requests per partition, and failures.",
            ["result"],
            registry=r,
        )
        self._share_acks_ok = self.share_acks.labels(result="ok")
        self._share_acks_failed = self.share_acks.labels(result="failed")
        self.lock_timeouts = Counter(
            f"{SHARE}_acquisitionlocktimeoutpersec",
            "Records whose acquisition lock expired before they were acknowledged.",
            registry=r,
        )
        self.archived_at_limit = Counter(
            f"{SHARE}_deliverycountlimitarchivedpersec",
            "Records archived because they reached the delivery-count limit.",
            registry=r,
        )
        self.share_state_write_failures = Counter(
            f"{SHARE}_sharestatewritefailures",
            "Share-state changes not made because their SHARE_DELTA/CHECKPOINT write failed.",
            registry=r,
        )
        self.records_acquired = Counter(
            f"{SHARE}_recordsacquiredpersec",
            "Records handed out by ShareFetch (deliveries).",
            registry=r,
        )

        # The log cleaner (kafka.log:type=LogCleaner).
        self.cleaner_bytes = Counter(
            "kafka_log_logcleaner_cleanedbytes",
            "Bytes of sealed segments read by the log cleaner's passes.",
            registry=r,
        )
        self.cleaner_records_removed = Counter(
            "kafka_log_logcleaner_removedrecords",
            "Records (and share-state control records below the ESO) removed by cleaning.",
            registry=r,
        )
        self.cleaner_passes = Counter(
            "kafka_log_logcleaner_passes", "Cleaning passes over a partition.", registry=r
        )

    def request_children(self, api: str) -> tuple[Counter, Histogram]:
        """The request counter and latency histogram of one API."""
        children = self._request_children.get(api)
        if children is None:
            children = self.requests.labels(request=api), self.latency.labels(request=api)
            self._request_children[api] = children
        return children

    def on_cleaning(self, bytes_read: int, records_removed: int) -> None:
        self.cleaner_passes.inc()
        self.cleaner_bytes.inc(bytes_read)
        self.cleaner_records_removed.inc(records_removed)

    # -- broker.share.share_metrics.ShareMetrics: what the share-partition manager counts ----

    def on_records_acquired(self, records: int) -> None:
        self.records_acquired.inc(records)

    def on_acknowledgement(self, ok: bool, records: Mapping[AcknowledgeType, int]) -> None:
        (self._share_acks_ok if ok else self._share_acks_failed).inc()
        if not ok:
            return
        for ack_type, n in records.items():
            child = self._record_acks_by_type.get(ack_type)
            if child is not None:  # GAP is not an acknowledgement type to count
                child.inc(n)

    def on_lock_timeouts(self, records: int) -> None:
        self.lock_timeouts.inc(records)

    def on_delivery_limit_archived(self, records: int) -> None:
        self.archived_at_limit.inc(records)

    def on_share_state_write_failure(self) -> None:
        self.share_state_write_failures.inc()

    def gauges(
        self,
        *,
        in_flight: Callable[[], float],
        acquired: Callable[[], float],
        sessions: Callable[[], float],
        groups: Callable[[], float],
        members: Callable[[], float],
        share_partitions: Callable[[], float],
        damaged_records: Callable[[], float],
    ) -> None:
        """Values read at scrape time from the live state (no bookkeeping on the hot path)."""
        for name, doc, fn in (
            (
                f"{SHARE}_inflightrecords",
                "Records in share-partition windows (SPSO to SPEO).",
                in_flight,
            ),
            (f"{SHARE}_acquiredrecords", "Records currently acquired under a lock.", acquired),
            (f"{SHARE}_sharesessions", "Open share sessions.", sessions),
            ("kafka_server_groupcoordinatormetrics_sharegroupcount", "Share groups.", groups),
            (
                "kafka_server_groupcoordinatormetrics_sharegroupmembers",
                "Members of share groups.",
                members,
            ),
            (
                f"{SHARE}_sharepartitions",
                "Share-partitions loaded on this broker.",
                share_partitions,
            ),
            (
                "shoal_log_damaged_records",
                "Offsets in damaged record batches found in the logs (stepped over, logged).",
                damaged_records,
            ),
        ):
            Gauge(name, doc, registry=self.registry).set_function(fn)

    def classic_groups(
        self, counts: Callable[[], Mapping[str, int]], rebalances: Callable[[], int]
    ) -> None:
        """Classic consumer groups by state, and completed rebalances, read at scrape time."""
        self.registry.register(_ClassicGroupCollector(counts, rebalances))

    def serve(self, host: str, port: int) -> int:
        """Start the scrape endpoint in a daemon thread; the port it listens on."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def stop(self) -> None:
        server = getattr(self, "_server", None)
        if server is not None:
            server.shutdown()
            server.server_close()


class _ClassicGroupCollector(Collector):
    """KIP-848's classic-group-count (by state) and classic-group-rebalance-count."""

    def __init__(
        self, counts: Callable[[], Mapping[str, int]], rebalances: Callable[[], int]
    ) -> None:
        self._counts = counts
        self._rebalances = rebalances

    def collect(self) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            f"{COORDINATOR}_classicgroupcount", "Classic consumer groups, by state.",
            labels=["state"],
        )  # fmt: skip
        for state, n in sorted(self._counts().items()):
            by_state.add_metric([state], n)
        yield by_state
        yield CounterMetricFamily(
            f"{COORDINATOR}_classicgrouprebalance",
            "Completed rebalances of classic consumer groups.",
            value=self._rebalances(),
        )
