"""RequestStats exports exactly what prometheus_client's own Counter and Histogram would.

The connection counts requests, latencies and error codes in plain numbers (a prometheus child
takes a lock per increment); the scrape must not tell the difference. Hypothesis makes the
requests; the same ones go through both, and the two expositions are compared line by line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry
from prometheus_client import Counter
from prometheus_client import Histogram
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from broker.metrics import ACK_TYPE_NAMES
from broker.metrics import LATENCY_BUCKETS
from broker.metrics import BrokerMetrics
from broker.metrics import RequestStats
from protocol.acknowledge_type import AcknowledgeType

APIS = ["Produce", "ShareFetch", "ShareAcknowledge"]
CODES = [
    int(ErrorCode.none),
    int(ErrorCode.unknown_topic_or_partition),
    int(ErrorCode.invalid_record_state),
]
# Latencies on and around every bucket bound: `le` is inclusive.
seconds = st.sampled_from(LATENCY_BUCKETS) | st.floats(0, 10, allow_nan=False)
requests = st.lists(
    st.tuples(st.sampled_from(APIS), seconds, st.lists(st.sampled_from(CODES[1:]), max_size=3)),
    max_size=40,
)


def reference(observed: list[tuple[str, float, list[int]]]) -> bytes:
    r = CollectorRegistry()
    count = Counter("kafka_network_requestmetrics_requests", "Requests handled, by API.",
                    ["request"], registry=r)  # fmt: skip
    errors = Counter(
        "kafka_network_requestmetrics_errors",
        "Error codes in responses, top-level and per partition (Kafka's ErrorsPerSec), by API.",
        ["request", "error"],
        registry=r,
    )
    latency = Histogram(
        "kafka_network_requestmetrics_totaltime_seconds",
        "Time from a request's arrival to its response being queued, by API.",
        ["request"],
        buckets=LATENCY_BUCKETS,
        registry=r,
    )
    Counter("kafka_network_requestmetrics_requestbytes_bytes",
            "Request frames received, in bytes (all APIs).", registry=r)  # fmt: skip
    Counter("kafka_network_requestmetrics_responsebytes_bytes",
            "Response frames sent, in bytes (all APIs).", registry=r)  # fmt: skip
    for api, secs, codes in observed:
        count.labels(request=api).inc()
        latency.labels(request=api).observe(secs)
        for code in codes:
            errors.labels(request=api, error=ErrorCode(code).name).inc()
    return generate_latest(r)


def ours(observed: list[tuple[str, float, list[int]]]) -> bytes:
    r = CollectorRegistry()
    stats = RequestStats()
    r.register(stats)
    for api, secs, codes in observed:
        stats.of(api).observe(secs)
        stats.count_errors(api, codes)
    return generate_latest(r)


def samples(exposition: bytes) -> dict[str, float]:
    """Sample lines by name and labels, and the HELP and TYPE lines (the order aside)."""
    out = {}
    for line in exposition.decode().splitlines():
        if line.startswith("#"):
            out[line] = 0.0
        elif line:
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


@given(requests)
def test_the_same_samples_as_prometheus_client(
    observed: list[tuple[str, float, list[int]]],
) -> None:
    theirs, mine = samples(reference(observed)), samples(ours(observed))
    assert mine.keys() == theirs.keys()
    for name, value in theirs.items():
        assert abs(mine[name] - value) <= 1e-9 * max(1.0, abs(value)), name


def test_the_broker_registry_serves_them() -> None:
    metrics = BrokerMetrics()
    metrics.request_stats.of("Produce").observe(0.001)
    metrics.request_stats.count_errors("Produce", [int(ErrorCode.corrupt_message)])
    assert metrics.request_stats.requests("Produce") == 1
    metrics.request_stats.bytes_in += 120
    text = generate_latest(metrics.registry).decode()
    assert 'kafka_network_requestmetrics_requests_total{request="Produce"} 1.0' in text
    assert (
        'kafka_network_requestmetrics_totaltime_seconds_bucket{le="0.001",request="Produce"} 1.0'
        in text
    )
    assert (
        'kafka_network_requestmetrics_errors_total{error="corrupt_message",request="Produce"} 1.0'
        in text
    )


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 10**6)), max_size=20)
)
def test_topic_bytes_in_as_prometheus_client_counts_them(produced: list[tuple[str, int]]) -> None:
    metrics = BrokerMetrics()
    reference = CollectorRegistry()
    counter = Counter("kafka_server_brokertopicmetrics_bytesin_bytes",
                      "BytesInPerSec: record bytes appended by Produce.", ["topic"],
                      registry=reference)  # fmt: skip
    for topic, n in produced:
        metrics.on_bytes_in(topic, n)
        counter.labels(topic=topic).inc(n)
    theirs = samples(generate_latest(reference))
    mine = {k: v for k, v in samples(generate_latest(metrics.registry)).items() if "bytesin" in k}
    assert mine == theirs


SHARE_COUNTERS = {
    "totalsharefetchrequestspersec": "TotalShareFetchRequestsPerSec: ShareFetch requests"
    " naming the topic.",
    "failedsharefetchrequestspersec": "FailedShareFetchRequestsPerSec: ShareFetch requests with"
    " a partition error.",
    "totalshareacknowledgementrequestspersec": "TotalShareAcknowledgementRequestsPerSec:"
    " requests acknowledging the topic's records (ShareAcknowledge, and acknowledgements"
    " carried by ShareFetch).",
    "failedshareacknowledgementrequestspersec": "FailedShareAcknowledgementRequestsPerSec:"
    " those with a partition error.",
    "bytesout_bytes": "BytesOutPerSec: record bytes returned by Fetch and ShareFetch.",
}
topics = st.sampled_from(["a", "b", "c", "d"])
share_requests = st.lists(
    st.tuples(
        st.sampled_from(["fetch", "ack"]),
        st.dictionaries(topics, st.booleans(), max_size=3),
        st.lists(st.tuples(topics, st.integers(0, 10**6)), max_size=3),
    ),
    max_size=20,
)


@given(share_requests)
def test_share_topic_counters_as_prometheus_client_counts_them(
    observed: list[tuple[str, dict[str, bool], list[tuple[str, int]]]],
) -> None:
    """ShareFetch and acknowledgement requests per topic, failed ones (0 included: the series
    exists once the topic is named) and bytes out: the same samples as prometheus_client's."""
    metrics = BrokerMetrics()
    reference = CollectorRegistry()
    counter = {
        name: Counter(f"kafka_server_brokertopicmetrics_{name}", doc, ["topic"], registry=reference)
        for name, doc in SHARE_COUNTERS.items()
    }
    for kind, failed_by_topic, sent in observed:
        if kind == "fetch":
            metrics.on_share_fetch(failed_by_topic)
            total, failed = "totalsharefetchrequestspersec", "failedsharefetchrequestspersec"
        else:
            metrics.on_share_acknowledgement(failed_by_topic)
            total = "totalshareacknowledgementrequestspersec"
            failed = "failedshareacknowledgementrequestspersec"
        for topic, fail in failed_by_topic.items():
            counter[total].labels(topic=topic).inc()
            counter[failed].labels(topic=topic).inc(fail)
        for topic, n in sent:
            metrics.on_bytes_out(topic, n)
            if n:  # no series for a topic nothing was sent from, as before
                counter["bytesout_bytes"].labels(topic=topic).inc(n)
    theirs = samples(generate_latest(reference))
    mine = {
        k: v
        for k, v in samples(generate_latest(metrics.registry)).items()
        if any(name in k for name in SHARE_COUNTERS)
    }
    assert mine == theirs


ACK_NAMES = {
    "recordacknowledgementspersec": "RecordAcknowledgementsPerSec: records acknowledged, by "
    "acknowledgement type.",
    "shareacknowledgementpersec": "ShareAcknowledgement: acknowledgement requests per "
    "partition, and failures.",
    "recordsacquiredpersec": "Records handed out by ShareFetch (deliveries).",
}
acknowledgements = st.lists(
    st.one_of(
        st.tuples(st.just("ack"), st.booleans(),
                  st.dictionaries(st.sampled_from(list(AcknowledgeType)), st.integers(0, 500))),
        st.tuples(st.just("acquired"), st.integers(0, 500), st.just({})),
    ),
    max_size=30,
)  # fmt: skip


def _families(exposition: bytes, names: Iterable[str]) -> list[str]:
    """The lines (HELP, TYPE, samples) of the named share families, in exposition order."""
    return [line for line in exposition.decode().splitlines() if any(n in line for n in names)]


@given(acknowledgements)
def test_share_acknowledgement_counters_as_prometheus_client_counts_them(
    observed: list[tuple[str, Any, dict[AcknowledgeType, int]]],
) -> None:
    """Acknowledgements (ok or failed, records by type, GAP not counted) and records acquired,
    counted in plain numbers (`LoopCounter`): the same lines in the same order, in both the
    text and the OpenMetrics expositions, as the prometheus_client Counters they replace, made
    as they were (every child bound up front, in ACK_TYPE_NAMES' order, then ok and failed)."""
    metrics = BrokerMetrics()
    reference = CollectorRegistry()
    share = "kafka_server_sharegroupmetrics_"
    by_type = Counter(
        share + "recordacknowledgementspersec",
        ACK_NAMES["recordacknowledgementspersec"],
        ["ackType"],
        registry=reference,
    )
    children = {t: by_type.labels(ackType=name) for t, name in ACK_TYPE_NAMES.items()}
    acks = Counter(share + "shareacknowledgementpersec", ACK_NAMES["shareacknowledgementpersec"],
                   ["result"], registry=reference)  # fmt: skip
    ok, failed = acks.labels(result="ok"), acks.labels(result="failed")
    acquired = Counter(share + "recordsacquiredpersec", ACK_NAMES["recordsacquiredpersec"],
                       registry=reference)  # fmt: skip
    for kind, value, records in observed:
        if kind == "acquired":
            metrics.on_records_acquired(value)
            acquired.inc(value)
            continue
        metrics.on_acknowledgement(value, records)
        (ok if value else failed).inc()
        if value:
            for t, n in records.items():
                if t in children:
                    children[t].inc(n)
    for write in (generate_latest, openmetrics_latest):
        assert _families(write(metrics.registry), ACK_NAMES) == _families(
            write(reference), ACK_NAMES
        )
