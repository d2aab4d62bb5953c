"""Partition-level error codes found in responses, and label caps that bound cardinality."""

from __future__ import annotations

import datetime
import uuid

import pytest
import structlog
from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v2.response import AcquiredRecords
from kio.schema.share_fetch.v2.response import LeaderIdAndEpoch
from kio.schema.share_fetch.v2.response import PartitionData
from kio.schema.share_fetch.v2.response import ShareFetchableTopicResponse
from kio.schema.share_fetch.v2.response import ShareFetchResponse
from kio.schema.types import BrokerId
from kio.static.primitive import Records
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64

from broker.metrics import OTHER
from broker.metrics import BoundedLabel
from broker.response_errors import error_codes
from broker.share_lag import ShareLagFamilies
from broker.share_lag import ShareReading


def _partition(index: int, code: ErrorCode, ack_code: ErrorCode) -> PartitionData:
    return PartitionData(
        partition_index=i32(index),
        error_code=code,
        error_message=None,
        acknowledge_error_code=i16(ack_code),
        acknowledge_error_message=None,
        current_leader=LeaderIdAndEpoch(leader_id=BrokerId(1), leader_epoch=i32(0)),
        records=Records(b""),
        acquired_records=(
            AcquiredRecords(first_offset=i64(0), last_offset=i64(9), delivery_count=i16(1)),
        ),
    )


def test_partition_level_codes_are_found_under_a_clean_top_level() -> None:
    response = ShareFetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta()),
        error_code=ErrorCode.none,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta()),
        responses=(
            ShareFetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=(
                    _partition(0, ErrorCode.none, ErrorCode.invalid_record_state),
                    _partition(1, ErrorCode.unknown_topic_or_partition, ErrorCode.none),
                    _partition(2, ErrorCode.none, ErrorCode.none),
                ),
            ),
        ),
        node_endpoints=(),
    )
    assert sorted(error_codes(response)) == sorted(
        [ErrorCode.invalid_record_state, ErrorCode.unknown_topic_or_partition]
    )


def test_label_values_past_the_cap_fold_into_other_with_one_log_line() -> None:
    label = BoundedLabel("topic", cap=2)
    with structlog.testing.capture_logs() as logs:
        assert [label(v) for v in ("a", "b", "a", "c", "d", "b")] == [
            "a",
            "b",
            "a",
            OTHER,
            OTHER,
            "b",
        ]
    assert len(logs) == 1 and logs[0]["label"] == "topic" and logs[0]["cap"] == 2


def test_share_lag_keeps_the_most_lagging_series_and_says_what_it_left_out() -> None:
    rows = [ShareReading(f"g{i}", "t", 0, lag=2 + i, oldest_age_s=10.0 - i) for i in range(5)]
    families_of = ShareLagFamilies(max_series=3)
    with structlog.testing.capture_logs() as logs:
        families = {f.name: f for f in families_of.collect(rows)}
        next(families_of.collect(rows))  # a second scrape logs nothing more
    lag = {s.labels["group"]: s.value for s in families["kafka_sharegroup_lag"].samples}
    assert lag == {"g4": 2 + 4, "g3": 2 + 3, "g2": 2 + 2}
    assert families["shoal_sharegroup_lag_series_omitted"].samples[0].value == 2
    assert len(logs) == 1 and logs[0]["omitted"] == 2
    # The age keeps its own top: the oldest records, whatever their lag.
    age = families["kafka_sharegroup_oldest_available_age_seconds"].samples
    assert {s.labels["group"] for s in age} == {"g0", "g1", "g2"}


def test_bytes_in_per_topic_and_folded_past_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker import metrics as metrics_module

    monkeypatch.setattr(metrics_module, "MAX_TOPIC_LABELS", 2)
    metrics = metrics_module.BrokerMetrics()
    for topic, n in [("a", 10), ("b", 20), ("a", 5), ("c", 1), ("d", 2), ("c", 4)]:
        metrics.on_bytes_in(topic, n)
    counted = {
        s.labels["topic"]: s.value
        for family in metrics.registry.collect()
        if family.name == f"{metrics_module.TOPICS}_bytesin_bytes"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert counted == {"a": 15, "b": 20, OTHER: 7}


def test_a_deleted_topic_frees_its_place_under_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    from broker import metrics as metrics_module

    monkeypatch.setattr(metrics_module, "MAX_TOPIC_LABELS", 2)
    metrics = metrics_module.BrokerMetrics()
    for topic in ("a", "b", "c"):
        metrics.on_bytes_in(topic, 10, records=1)
    metrics.forget_topic("a")
    metrics.on_bytes_in("d", 5, records=2)  # a's place: its own series, not `other`
    counted = {
        (family.name, s.labels["topic"]): s.value
        for family in metrics.registry.collect()
        if family.name.startswith(f"{metrics_module.TOPICS}_")
        for s in family.samples
    }
    messages = f"{metrics_module.TOPICS}_messagesin"
    assert {t: v for (name, t), v in counted.items() if name == messages} == {
        "b": 1, OTHER: 1, "d": 2,
    }  # fmt: skip
    assert all(t != "a" for _, t in counted)
