"""spark.progress: the offsets and metrics a streaming query's progress reports (issue 30)."""

from __future__ import annotations

import json

from spark.progress import BATCH
from spark.progress import batch_of
from spark.progress import end_offset
from spark.progress import latest_report
from spark.progress import positions_of
from spark.progress import shoal_metrics
from spark.progress import source_metrics


def test_an_end_offset_is_kafkas_shape_plus_the_batch_number() -> None:
    start = {"orders": {"0": 10}, BATCH: 3}
    end = end_offset(start, 4, [("orders", 0, 14), ("orders", 1, 7), ("orders", 0, 2)])
    assert end == {"orders": {"0": 15, "1": 8}, BATCH: 4}
    # A redelivered record below the high-water mark does not move it back.
    assert end_offset(end, 5, [("orders", 0, 3)])["orders"] == {"0": 15, "1": 8}
    assert positions_of(end) == {("orders", 0): 15, ("orders", 1): 8}


def test_checkpoints_of_older_versions_still_name_their_batch() -> None:
    assert batch_of({"seq": 7}) == 7
    assert positions_of({"seq": 7}) == {}
    assert batch_of({BATCH: 2, "seq": 9}) == 2
    assert batch_of({}) == 0


def test_metrics_are_latest_minus_read_per_partition_as_sparks_kafka_source() -> None:
    """KafkaMicroBatchStream.metrics (Spark, kafka-0-10-sql): min/max as longs, avg as a
    double, all as strings; plus the share group's lag in records."""
    latest = {("t", 0): 100, ("t", 1): 50, ("t", 2): 30}
    read_to = {("t", 0): 90, ("t", 1): 50}
    metrics = source_metrics(latest, read_to, {("t", 2): 0}, group_lag=42)
    assert metrics == {
        "avgOffsetsBehindLatest": str((10 + 0 + 30) / 3),
        "maxOffsetsBehindLatest": "30",
        "minOffsetsBehindLatest": "0",
        "shareGroupLag": "42",
    }
    # A partition neither read nor started by the group (reset latest) is not behind.
    assert source_metrics({("t", 0): 5}, {}, {}, None) == {
        "avgOffsetsBehindLatest": "0.0",
        "maxOffsetsBehindLatest": "0",
        "minOffsetsBehindLatest": "0",
    }


def test_shoal_metrics_reads_them_back_from_a_progress() -> None:
    report = latest_report({("t", 0): 5}, {"shareGroupLag": "3"})
    progress = {"sources": [{"latestOffset": json.dumps(report)}]}
    assert shoal_metrics(progress) == {"shareGroupLag": "3"}
    assert shoal_metrics(json.dumps(progress)) == {"shareGroupLag": "3"}
    assert shoal_metrics({"sources": [{"latestOffset": None}]}) == {}
