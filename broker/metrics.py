"""Prometheus metrics, on a registry of the broker's own (several test brokers share a process).

Names follow the JMX names an operator of Kafka knows, lower-cased the way the Prometheus JMX
exporter writes them: KIP-932/KIP-1222's `kafka.server:type=ShareGroupMetrics,
name=RecordAcknowledgementsPerSec,ackType=...` is
`kafka_server_sharegroupmetrics_recordacknowledgementspersec_total{ackType="Accept"}` (a
counter: Prometheus derives the per-second rate). Labels are bounded: API names, error codes,
ack types, never member ids or offsets. Topics and groups are labels where Kafka has them
(BrokerTopicMetrics, share lag), each capped by `BoundedLabel`: past the cap new values fold
into one `other` series and a log line says so once. Byte counters carry `_bytes` and times
`_seconds` (Prometheus base units), and no `_created` series is exported.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from itertools import accumulate

import structlog
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Gauge
from prometheus_client import Histogram
from prometheus_client import ProcessCollector
from prometheus_client import disable_created_metrics
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from broker.connection_quotas import ListenerConnections
from protocol.acknowledge_type import AcknowledgeType

# The `ackType` labels: every type a record is acknowledged with (a gap holds no record).
ACK_TYPE_NAMES: dict[AcknowledgeType, str] = {
    t: t.metric_name for t in AcknowledgeType if t is not AcknowledgeType.GAP
}
SHARE = "kafka_server_sharegroupmetrics"
COORDINATOR = "kafka_server_groupcoordinatormetrics"
TOPICS = "kafka_server_brokertopicmetrics"
SOCKET_SERVER = "kafka_server_socket_server_metrics"  # Selector's metrics, tagged by listener
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOAD_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
MAX_TOPIC_LABELS = 1000
MAX_GROUP_LABELS = 1000
OTHER = "other"  # where label values past a cap are counted

log = structlog.get_logger("shoal.metrics")
# A `_created` gauge per counter doubles the series and no Kafka dashboard reads it.
disable_created_metrics()  # type: ignore[no-untyped-call]


class BoundedLabel:
    """The first `cap` values of a label pass; later ones fold into OTHER, logged once."""

    def __init__(self, label: str, cap: int) -> None:
        self._label = label
        self._cap = cap
        self._seen: set[str] = set()
        self._warned = False

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) < self._cap:
            self._seen.add(value)
            return value
        if not self._warned:
            self._warned = True
            log.warning(
                "metric label cap reached; further values are counted as 'other'",
                label=self._label, cap=self._cap, first_folded=value,
            )  # fmt: skip
        return OTHER

    def forget(self, value: str) -> None:
        """`value` is gone (a deleted topic): its place is free for another."""
        self._seen.discard(value)


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        # Requests (kafka.network:type=RequestMetrics): counted per request, exported at scrape.
        self.request_stats = RequestStats()
        r.register(self.request_stats)
        # Per topic (kafka.server:type=BrokerTopicMetrics,topic=...): record bytes as Kafka's
        # BytesInPerSec (produced) and BytesOutPerSec (fetched and share-fetched) count them.
        self.topic_label = BoundedLabel("topic", MAX_TOPIC_LABELS)
        # Added to once per produced batch: plain numbers, as RequestStats keeps.
        self.topic_bytes_in = PlainCounter(
            f"{TOPICS}_bytesin_bytes", "BytesInPerSec: record bytes appended by Produce.", "topic"
        )
        r.register(self.topic_bytes_in)
        # MessagesInPerSec: offsets assigned by Produce (each batch header's record count,
        # as Kafka's LogAppendInfo.numMessages), added to with the bytes.
        self.topic_messages_in = PlainCounter(
            f"{TOPICS}_messagesin", "MessagesInPerSec: records appended by Produce.", "topic"
        )
        r.register(self.topic_messages_in)
        # Added to once per fetch or share fetch: plain numbers like the bytes in.
        self.topic_bytes_out = PlainCounter(
            f"{TOPICS}_bytesout_bytes",
            "BytesOutPerSec: record bytes returned by Fetch and ShareFetch.",
            "topic",
        )
        self.share_fetch_requests = PlainCounter(
            f"{TOPICS}_totalsharefetchrequestspersec",
            "TotalShareFetchRequestsPerSec: ShareFetch requests naming the topic.",
            "topic",
        )
        self.share_fetch_failed = PlainCounter(
            f"{TOPICS}_failedsharefetchrequestspersec",
            "FailedShareFetchRequestsPerSec: ShareFetch requests with a partition error.",
            "topic",
        )
        self.share_ack_requests = PlainCounter(
            f"{TOPICS}_totalshareacknowledgementrequestspersec",
            "TotalShareAcknowledgementRequestsPerSec: requests acknowledging the topic's records "
            "(ShareAcknowledge, and acknowledgements carried by ShareFetch).",
            "topic",
        )
        self.share_ack_failed = PlainCounter(
            f"{TOPICS}_failedshareacknowledgementrequestspersec",
            "FailedShareAcknowledgementRequestsPerSec: those with a partition error.",
            "topic",
        )
        for plain in (
            self.topic_bytes_out,
            self.share_fetch_requests,
            self.share_fetch_failed,
            self.share_ack_requests,
            self.share_ack_failed,
        ):
            r.register(plain)
        self._per_topic = (
            self.topic_bytes_in,
            self.topic_messages_in,
            self.topic_bytes_out,
            self.share_fetch_requests,
            self.share_fetch_failed,
            self.share_ack_requests,
            self.share_ack_failed,
        )
        # process_* (CPU seconds, resident and virtual memory, open and max fds, start time),
        # read from /proc at scrape time; absent where /proc is not (macOS).
        ProcessCollector(registry=r)
        # Share groups (KIP-932, KIP-1103, KIP-1222).
        # Counted per acknowledgement: plain numbers, each series shown at 0 from the start.
        self.record_acks = LoopCounter(
            f"{SHARE}_recordacknowledgementspersec",
            "RecordAcknowledgementsPerSec: records acknowledged, by acknowledgement type.",
            "ackType",
            ACK_TYPE_NAMES.values(),
        )
        r.register(self.record_acks)
        self.share_acks = LoopCounter(
            f"{SHARE}_shareacknowledgementpersec",
            "ShareAcknowledgement: acknowledgement requests per partition, and failures.",
            "result",
            ("ok", "failed"),
        )
        r.register(self.share_acks)
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
        # The same by group and topic, to find whose records are given up on (each line of
        # the log names their offsets). Both labels are capped: past MAX_GROUP_LABELS groups
        # or MAX_TOPIC_LABELS topics the rest fold into "other".
        self.group_label = BoundedLabel("group", MAX_GROUP_LABELS)
        self.archived_at_limit_by_group = Counter(
            "shoal_sharegroup_delivery_limit_archived_records",
            "Records given up on at the delivery-count limit, by share group and topic "
            "(archived, or copied to the group's dead-letter topic first).",
            ["group", "topic"],
            registry=r,
        )
        self.share_state_write_failures = Counter(
            f"{SHARE}_sharestatewritefailures",
            "Share-state changes not made because their SHARE_DELTA/CHECKPOINT write failed.",
            registry=r,
        )
        self.dead_letters = Counter(
            f"{SHARE}_deadletterrecordspersec",
            "Records given up on (KIP-1191): copied to the group's dead-letter topic, or "
            "archived without a copy because that topic cannot be used.",
            ["result"],
            registry=r,
        )
        self.records_released = Counter(
            f"{SHARE}_recordsreleasedpersec",
            "Acquired records made available again without an acknowledgement, by reason: "
            "member_left (session closed, member left or timed out), lock_timeout.",
            ["reason"],
            registry=r,
        )
        for reason in ("member_left", "lock_timeout"):
            self.records_released.labels(reason=reason)
        self.partition_load_time = Histogram(
            f"{SHARE}_partitionloadtime_seconds",
            "PartitionLoadTimeMs, in seconds: time to load a share-partition's state.",
            buckets=LOAD_BUCKETS,
            registry=r,
        )
        self.records_acquired = LoopCounter(
            f"{SHARE}_recordsacquiredpersec", "Records handed out by ShareFetch (deliveries)."
        )
        r.register(self.records_acquired)

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

    def on_cleaning(self, bytes_read: int, records_removed: int) -> None:
        self.cleaner_passes.inc()
        self.cleaner_bytes.inc(bytes_read)
        self.cleaner_records_removed.inc(records_removed)

    # -- broker.share.share_metrics.ShareMetrics: what the share-partition manager counts ----

    def on_partition_loaded(self, seconds: float) -> None:
        self.partition_load_time.observe(seconds)

    def on_member_released(self, records: int) -> None:
        self.records_released.labels(reason="member_left").inc(records)

    def on_records_acquired(self, records: int) -> None:
        self.records_acquired.values[""] += records

    def on_acknowledgement(self, ok: bool, records: Mapping[AcknowledgeType, int]) -> None:
        self.share_acks.values["ok" if ok else "failed"] += 1
        if not ok:
            return
        by_type = self.record_acks.values
        for ack_type, n in records.items():
            name = ACK_TYPE_NAMES.get(ack_type)
            if name is not None:  # GAP is not an acknowledgement type to count
                by_type[name] += n

    def on_lock_timeouts(self, records: int) -> None:
        self.lock_timeouts.inc(records)
        self.records_released.labels(reason="lock_timeout").inc(records)

    def on_delivery_limit_archived(self, group: str, topic: str, records: int) -> None:
        self.archived_at_limit.inc(records)
        labels = {"group": self.group_label(group), "topic": self.topic_label(topic)}
        self.archived_at_limit_by_group.labels(**labels).inc(records)

    def on_share_state_write_failure(self) -> None:
        self.share_state_write_failures.inc()

    def on_dead_letters(self, records: int, *, copied: bool) -> None:
        self.dead_letters.labels(result="copied" if copied else "not_copied").inc(records)

    # -- per topic, from the handlers ---------------------------------------------------------

    def _topic(self, counts: dict[str, float], topic: str) -> str:
        """The topic's label value: itself once admitted (a key of `counts`), else as the cap
        decides."""
        return topic if topic in counts else self.topic_label(topic)

    def on_bytes_in(self, topic: str, n: int, records: int = 0) -> None:
        """A produced partition's record bytes and records (offsets it was given)."""
        counts = self.topic_bytes_in.values
        label = topic if topic in counts else self.topic_label(topic)  # `_topic`, inline
        counts[label] = counts.get(label, 0) + n
        messages = self.topic_messages_in.values
        messages[label] = messages.get(label, 0) + records

    def forget_topic(self, topic: str) -> None:
        """A deleted topic: its series leave every per-topic metric (a topic made again
        under the name starts from 0, as Kafka's BrokerTopicStats.removeMetrics does), and its
        place under the label cap is free. What was folded into `other` stays there."""
        for plain in self._per_topic:
            plain.values.pop(topic, None)
        self.topic_label.forget(topic)

    def on_bytes_out(self, topic: str, n: int) -> None:
        if n:
            counts = self.topic_bytes_out.values
            label = self._topic(counts, topic)
            counts[label] = counts.get(label, 0) + n

    def on_share_fetch(self, failed_by_topic: Mapping[str, bool]) -> None:
        """One ShareFetch: for each topic it named, whether a partition of it failed."""
        self._count_requests(self.share_fetch_requests, self.share_fetch_failed, failed_by_topic)

    def on_share_acknowledgement(self, failed_by_topic: Mapping[str, bool]) -> None:
        """One request's acknowledgements: for each topic, whether a partition's failed."""
        self._count_requests(self.share_ack_requests, self.share_ack_failed, failed_by_topic)

    def _count_requests(
        self, total: PlainCounter, failed: PlainCounter, failed_by_topic: Mapping[str, bool]
    ) -> None:
        """A request per topic in `total`, and in `failed` if it failed (0 too: the series
        exists, as a prometheus_client child shows 0 once it is made)."""
        counts, failures = total.values, failed.values
        for topic, fail in failed_by_topic.items():
            label = self._topic(counts, topic)
            counts[label] = counts.get(label, 0) + 1
            failures[label] = failures.get(label, 0) + fail

    def gauges(
        self,
        *,
        in_flight: Callable[[], float],
        acquired: Callable[[], float],
        sessions: Callable[[], float],
        members: Callable[[], float],
        share_partitions: Callable[[], float],
        damaged_records: Callable[[], float],
        missing_records: Callable[[], float],
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
            (
                "shoal_log_missing_records",
                "Offsets no segment file held at start: a lost or cut segment (logged).",
                missing_records,
            ),
        ):
            Gauge(name, doc, registry=self.registry).set_function(fn)

    def classic_groups(
        self, counts: Callable[[], Mapping[str, int]], rebalances: Callable[[], int]
    ) -> None:
        """Classic consumer groups by state, and completed rebalances, read at scrape time."""
        self.registry.register(_GroupCollector("classic", counts, rebalances))

    def consumer_groups(
        self, counts: Callable[[], Mapping[str, int]], rebalances: Callable[[], int]
    ) -> None:
        """KIP-848 consumer groups by state, and target assignments computed (rebalances)."""
        self.registry.register(_GroupCollector("consumer", counts, rebalances))

    def share_groups(
        self, counts: Callable[[], Mapping[str, int]], rebalances: Callable[[], int]
    ) -> None:
        """Share groups by state (KIP-932's share-group-count) and their rebalances."""
        self.registry.register(_GroupCollector("share", counts, rebalances))

    def connections(self, listeners: Callable[[], Mapping[str, ListenerConnections]]) -> None:
        """Connections by listener (broker.connection_quotas' counts), read at scrape time."""
        self.registry.register(_ConnectionCollector(listeners))

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


class PlainCounter(Collector):
    """A counter with one label, as plain numbers the loop adds to (no lock per increment);
    a series exists once its label value has been added to, as with prometheus_client's."""

    def __init__(self, name: str, documentation: str, label: str) -> None:
        self._name = name
        self._documentation = documentation
        self._label = label
        self.values: dict[str, float] = {}

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=[self._label])
        for value, n in sorted(self.values.items()):  # one C-level copy, as RequestStats does
            family.add_metric([value], n)
        yield family


class LoopCounter(Collector):
    """A counter added to by the loop alone, its series (`label`'s `values`, or one with no
    label) made up front and shown in that order: the exposition of a prometheus_client
    Counter with those children made at once (`_created` series are off), without its lock
    and four Python calls per increment (~55 opcodes; three increments a steady-rate
    ShareFetch: 11,095 -> 10,977 opcodes)."""

    def __init__(
        self, name: str, documentation: str, label: str | None = None, values: Iterable[str] = ()
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labels = [label] if label is not None else []
        self.values: dict[str, float] = dict.fromkeys(values if label is not None else [""], 0.0)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labels)
        labelled = bool(self._labels)
        for value, n in list(self.values.items()):  # in the order made, as Counter shows them
            family.add_metric([value] if labelled else [], n)
        yield family


class ApiStats:
    """One API's requests: how many, and their latencies by histogram bucket."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0  # seconds
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last is +Inf

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        self.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1


class RequestStats(Collector):
    """Kafka's RequestMetrics (requests, total time, error codes) by API, and the bytes of
    request and response frames, as plain numbers.

    A prometheus_client child takes a lock per increment (a histogram one per observation and
    bucket), several per request; the loop alone adds to these, and a scrape reads them.
    """

    def __init__(self) -> None:
        self._apis: dict[str, ApiStats] = {}
        self._errors: dict[tuple[str, int], int] = {}
        self.bytes_in = 0  # request frames received (all APIs), added to once per read
        self.bytes_out = 0  # response frames sent, once per write

    def of(self, api: str) -> ApiStats:
        stats = self._apis.get(api)
        if stats is None:
            stats = self._apis[api] = ApiStats()
        return stats

    def count_errors(self, api: str, codes: Iterable[int]) -> None:
        errors = self._errors
        for code in codes:
            key = (api, code)
            errors[key] = errors.get(key, 0) + 1

    def count_error_totals(self, api: str, totals: Mapping[int, int]) -> None:
        """`count_errors` of codes already counted (a large response's, off the loop)."""
        errors = self._errors
        for code, n in totals.items():
            key = (api, code)
            errors[key] = errors.get(key, 0) + n

    def requests(self, api: str) -> int:
        """Requests of `api` handled so far."""
        stats = self._apis.get(api)
        return 0 if stats is None else stats.count

    def collect(self) -> Iterator[Metric]:
        apis = sorted(self._apis.items())  # one C-level copy: the loop may add an API meanwhile
        errors = sorted(self._errors.items())
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests handled, by API.", labels=["request"]
        )
        latency = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltime_seconds",
            "Time from a request's arrival to its response being queued, by API.",
            labels=["request"],
        )
        for api, stats in apis:
            requests.add_metric([api], stats.count)
            cumulative = list(accumulate(stats.buckets))
            latency.add_metric(
                [api],
                [(_LE[i], n) for i, n in enumerate(cumulative)],
                sum_value=stats.total,
            )
        failed = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses, top-level and per partition (Kafka's ErrorsPerSec), by API.",
            labels=["request", "error"],
        )
        for (api, code), n in errors:
            failed.add_metric([api, _error_name(code)], n)
        yield requests
        yield latency
        yield failed
        yield CounterMetricFamily(
            "kafka_network_requestmetrics_requestbytes_bytes",
            "Request frames received, in bytes (all APIs).",
            value=self.bytes_in,
        )
        yield CounterMetricFamily(
            "kafka_network_requestmetrics_responsebytes_bytes",
            "Response frames sent, in bytes (all APIs).",
            value=self.bytes_out,
        )


_LE = [floatToGoString(b) for b in LATENCY_BUCKETS] + ["+Inf"]  # type: ignore[no-untyped-call]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_GROUP_KINDS = {
    "classic": "Classic consumer groups",
    "consumer": "KIP-848 consumer groups",
    "share": "Share groups",
}


class _GroupCollector(Collector):
    """KIP-848's <kind>-group-count (by state) and <kind>-group-rebalance-count, for classic
    and consumer (KIP-848) groups, and KIP-932's share-group-count for share groups."""

    def __init__(
        self, kind: str, counts: Callable[[], Mapping[str, int]], rebalances: Callable[[], int]
    ) -> None:
        self._kind = kind
        self._counts = counts
        self._rebalances = rebalances

    def collect(self) -> Iterator[Metric]:
        by_state = GaugeMetricFamily(
            f"{COORDINATOR}_{self._kind}groupcount",
            f"{_GROUP_KINDS[self._kind]}, by state.",
            labels=["state"],
        )
        for state, n in sorted(self._counts().items()):
            by_state.add_metric([state], n)
        yield by_state
        yield CounterMetricFamily(
            f"{COORDINATOR}_{self._kind}grouprebalance",
            f"Rebalances of {_GROUP_KINDS[self._kind].lower()} (for KIP-848 groups: target "
            "assignments computed).",
            value=self._rebalances(),
        )


class _ConnectionCollector(Collector):
    """Kafka's socket-server metrics (Selector's SelectorMetrics: connection-count,
    connection-creation-total, connection-close-total; the Acceptor's AcceptorBlockedPercent)
    by listener, and what Kafka only logs: refusals by max.connections.per.ip and closes by
    connections.max.idle.ms or a lowered max.connections. Labels: listener names (from the
    config) and limit names, never an address or a client id."""

    def __init__(self, listeners: Callable[[], Mapping[str, ListenerConnections]]) -> None:
        self._listeners = listeners

    def collect(self) -> Iterator[Metric]:
        rows = sorted(self._listeners().items())  # one copy: the loop may add a listener
        count = GaugeMetricFamily(
            f"{SOCKET_SERVER}_connection_count", "connection-count: open connections.",
            labels=["listener"],
        )  # fmt: skip
        created = CounterMetricFamily(
            f"{SOCKET_SERVER}_connection_creation",
            "connection-creation-total: connections accepted and admitted.",
            labels=["listener"],
        )
        closed = CounterMetricFamily(
            f"{SOCKET_SERVER}_connection_close",
            "connection-close-total: admitted connections closed, by either side.",
            labels=["listener"],
        )
        blocked = CounterMetricFamily(
            "kafka_network_acceptor_acceptorblockedpercent_seconds",
            "AcceptorBlockedPercent, as seconds: time the listener did not accept because "
            "max.connections was reached (rate() is the fraction of time blocked).",
            labels=["listener"],
        )
        refused = CounterMetricFamily(
            "shoal_socket_server_connections_refused",
            "Connections closed once accepted because their address held its limit.",
            labels=["listener", "limit"],
        )
        expired = CounterMetricFamily(
            "shoal_socket_server_connections_closed_by_broker",
            "Connections the broker closed: idle for connections.max.idle.ms, or over a "
            "lowered max.connections.",
            labels=["listener", "reason"],
        )
        for listener, c in rows:
            count.add_metric([listener], c.open)
            created.add_metric([listener], c.created)
            closed.add_metric([listener], c.closed)
            blocked.add_metric([listener], c.blocked_s)
            refused.add_metric([listener, "max.connections.per.ip"], c.refused_per_ip)
            expired.add_metric([listener, "connections.max.idle.ms"], c.closed_idle)
            expired.add_metric([listener, "max.connections"], c.closed_excess)
        yield from (count, created, closed, blocked, refused, expired)
