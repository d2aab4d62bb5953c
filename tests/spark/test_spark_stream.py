"""Streaming a share group with the `shoal` PySpark data source: every record once, the work
shared between queries, micro-batches sized by the read limit, and shoal_ack's verdicts."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from spark import shoal_ack
from spark.progress import shoal_metrics
from tests.brokers import BrokerProcess
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce
from tests.spark.queries import Collector
from tests.spark.queries import run_available_now
from tests.spark.queries import stream
from tests.spark.queries import unacknowledged

pytestmark = pytest.mark.spark


def test_stream_reads_every_record_once_then_nothing_is_left(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    total = 20_000  # three micro-batches over four partitions
    create_topic(broker.bootstrap, "big", 4)
    produce(broker.bootstrap, "big", total, partitions=4, batch=500)
    configure_group(broker.bootstrap, "big-group")
    df = stream(spark, broker, "big", "big-group", maxRecordsPerTrigger=8_000)
    q = (
        df.writeStream.format("memory")
        .queryName("big_out")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck1"))
        .start()
    )
    assert q.awaitTermination(180)
    assert q.exception() is None
    # One job reads the sink back (a count, a distinct and a filter were three more).
    out = spark.sql("select partition, offset, value, deliveryCount from big_out").collect()
    assert len(out) == total
    assert len({(r.partition, r.offset) for r in out}) == total
    assert {r.deliveryCount for r in out} == {1}
    assert {r.value for r in out} == {f"v{i}".encode() for i in range(total)}

    # A second run (its own checkpoint, same group) finds everything acknowledged.
    again = Collector()
    run_available_now(stream(spark, broker, "big", "big-group"), again, tmp_path / "ck2")
    assert again.rows == []


def test_two_queries_in_one_group_split_the_records(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    total = 4000  # sixteen micro-batches between the two
    create_topic(broker.bootstrap, "split", 2)
    produce(broker.bootstrap, "split", total, partitions=2)
    configure_group(broker.bootstrap, "split-group")
    sinks = [Collector(), Collector()]
    queries = [
        stream(spark, broker, "split", "split-group", maxRecordsPerTrigger=250)
        .writeStream.foreachBatch(sink)
        .trigger(processingTime="100 milliseconds")
        .option("checkpointLocation", str(tmp_path / f"ck{i}"))
        .start()
        for i, sink in enumerate(sinks)
    ]
    try:
        deadline = time.monotonic() + 120
        while len(set(sinks[0].offsets()) | set(sinks[1].offsets())) < total:
            assert time.monotonic() < deadline, "the two queries did not read everything"
            assert all(q.exception() is None for q in queries)
            time.sleep(0.2)
        # Each query accepts its last batch at its next trigger.
        while unacknowledged(broker.bootstrap, "split-group", "split") != 0:
            assert time.monotonic() < deadline, "the last batches were not accepted"
            time.sleep(0.1)
    finally:
        for q in queries:
            q.stop()
    a, b = (sink.offsets() for sink in sinks)
    assert len(a) == len(set(a)) and len(b) == len(set(b))
    assert set(a).isdisjoint(b), "a record went to both queries"
    assert len(a) + len(b) == total
    assert a and b, "one query got nothing: the group did not share the work"
    assert unacknowledged(broker.bootstrap, "split-group", "split") == 0  # none released


def test_two_available_now_queries_in_one_group_share_the_work(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """Each query waits until nobody in the group holds or can get a record below the end
    offsets noted at its start, instead of ending on its first empty poll."""
    total = 1200
    create_topic(broker.bootstrap, "drain", 2)
    produce(broker.bootstrap, "drain", total, partitions=2)
    configure_group(broker.bootstrap, "drain-group")

    def slow(df: Any, batch_id: int) -> None:
        time.sleep(0.3)  # keeps the first query busy while the second joins

    sinks = [Collector(before=slow), Collector(before=slow)]
    queries = [
        stream(spark, broker, "drain", "drain-group", maxOffsetsPerTrigger=300)
        .writeStream.foreachBatch(sink)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / f"ck{i}"))
        .start()
        for i, sink in enumerate(sinks)
    ]
    for q in queries:
        assert q.awaitTermination(120), "an AvailableNow query did not end"
        assert q.exception() is None
    a, b = (sink.offsets() for sink in sinks)
    assert a and b, f"one query got nothing ({len(a)} and {len(b)} rows)"
    assert set(a).isdisjoint(b)
    assert sorted(a + b) == sorted(("drain", i % 2, i // 2) for i in range(total))
    assert unacknowledged(broker.bootstrap, "drain-group", "drain") == 0


@pytest.mark.parametrize("limit", [250, 1000])
def test_micro_batches_hold_exactly_max_offsets_per_trigger(
    spark: Any, broker: BrokerProcess, tmp_path: Path, limit: int
) -> None:
    """Spark's `maxOffsetsPerTrigger` is exact, as in Spark's Kafka source (issue 30: whole
    stored batches made 1,000 into 2,095-2,482): stored batches of 700 records over 4
    partitions, which the group lets hold 2,000 records each in flight."""
    topic, group, total = f"limit-{limit}", f"limit-group-{limit}", 3 * limit + 1000
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, total, partitions=4, batch=700)
    configure_group(broker.bootstrap, group)
    df = stream(spark, broker, topic, group, maxOffsetsPerTrigger=limit, numPartitions=2)
    q = (
        df.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    assert q.awaitTermination(120)
    assert q.exception() is None
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == total
    assert sizes[:-1] == [limit] * (len(sizes) - 1), sizes

    # The progress (issue 30 item 3): offsets per topic-partition as Spark's Kafka source
    # reports them, and the metrics with the group's lag in the latest offset.
    last = [_source(p) for p in q.recentProgress if p["numInputRows"]][-1]
    end = last["endOffset"]
    assert sorted(end[topic]) == ["0", "1", "2", "3"]
    assert end["shoal:batch"] == len(sizes)
    assert sorted(last["latestOffset"][topic]) == ["0", "1", "2", "3"]
    metrics = shoal_metrics(q.lastProgress)
    assert set(metrics) >= {"avgOffsetsBehindLatest", "maxOffsetsBehindLatest", "shareGroupLag"}
    # Asked of the broker at most every 5 s, so it may trail the last batches by a few.
    assert 0 <= int(metrics["shareGroupLag"]) <= total


def _source(progress: Any) -> dict[str, Any]:
    """The progress's source, its offsets as dicts (PySpark hands them as JSON text)."""
    source = dict(json.loads(progress.json)["sources"][0])
    for k in ("startOffset", "endOffset", "latestOffset"):
        if isinstance(source.get(k), str):
            source[k] = json.loads(source[k])
    return source


def test_tasks_that_fetch_their_ranges_read_every_record(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """dataPath=fetch: the driver hands out ranges only, the tasks read them by offset."""
    create_topic(broker.bootstrap, "ranges", 2)
    produce(broker.bootstrap, "ranges", 2000, partitions=2, batch=100)
    configure_group(broker.bootstrap, "ranges-group")
    sink = Collector()
    df = stream(
        spark, broker, "ranges", "ranges-group", dataPath="fetch", numPartitions=3,
        maxRecordsPerTrigger=700,
    )  # fmt: skip
    run_available_now(df, sink, tmp_path / "ck")
    rows = sink.rows
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (i % 2, i // 2) for i in range(2000)
    )
    assert {r.value for r in rows} == {f"v{i}".encode() for i in range(2000)}
    assert {r.deliveryCount for r in rows} == {1}


def test_shoal_ack_rejects_or_releases_failed_rows(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    create_topic(broker.bootstrap, "verdicts", 1)
    produce(broker.bootstrap, "verdicts", 100)
    configure_group(broker.bootstrap, "verdicts-group", share_delivery_count_limit="3")
    ack_dir = str(tmp_path / "acks")

    def judge(df: Any, batch_id: int) -> None:
        df = df.withColumn("ok", ~F.col("value").isin(b"v7", b"v8"))
        shoal_ack(df.where("value != 'v8'"), "ok", ack_dir=ack_dir, failed="release")
        shoal_ack(df.where("value = 'v8'"), "ok", ack_dir=ack_dir, failed="reject")

    sink = Collector(before=judge)
    df = stream(spark, broker, "verdicts", "verdicts-group", ackDir=ack_dir)
    run_available_now(df, sink, tmp_path / "ck")
    seen: dict[bytes, list[int]] = {}
    for r in sink.rows:
        seen.setdefault(r.value, []).append(r.deliveryCount)
    assert sorted(seen[b"v7"]) == [1, 2, 3]  # released until the delivery-count limit
    assert seen[b"v8"] == [1]  # rejected: archived at once
    assert all(counts == [1] for v, counts in seen.items() if v not in (b"v7", b"v8"))
    assert len(seen) == 100
    assert list(Path(ack_dir).glob("*.json")) == []
    again = Collector()
    run_available_now(stream(spark, broker, "verdicts", "verdicts-group"), again, tmp_path / "ck2")
    assert again.rows == []
