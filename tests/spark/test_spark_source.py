"""The `shoal` PySpark data source against a real broker process and a local Spark session."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from client import Admin
from client import ConsumerRecord
from client import ShareConsumer
from spark import ShoalDataSource
from spark import shoal_ack
from spark.group_state import backlog
from tests.brokers import BrokerProcess
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark


def _stream(spark: Any, broker: BrokerProcess, topic: str, group: str, **options: Any) -> Any:
    reader = (
        spark.readStream.format("shoal")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("group", group)
        .option("pollTimeoutMs", "500")
    )
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


class Collector:
    """A foreachBatch sink in this process: the rows of every batch, by batch id."""

    def __init__(self, before: Any = None) -> None:
        self.batches: dict[int, list[Any]] = {}
        self.lock = threading.Lock()
        self.before = before

    def __call__(self, df: Any, batch_id: int) -> None:
        if self.before is not None:
            self.before(df, batch_id)
        rows = df.select("topic", "partition", "offset", "value", "deliveryCount").collect()
        with self.lock:
            self.batches[batch_id] = rows  # a replayed batch replaces its first attempt

    @property
    def rows(self) -> list[Any]:
        with self.lock:
            return [r for rows in self.batches.values() for r in rows]

    def offsets(self) -> list[tuple[str, int, int]]:
        return [(r.topic, r.partition, r.offset) for r in self.rows]


def _run_available_now(df: Any, sink: Collector, checkpoint: Path, timeout: float = 120) -> None:
    q = df.writeStream.foreachBatch(sink).trigger(availableNow=True)
    q = q.option("checkpointLocation", str(checkpoint)).start()
    assert q.awaitTermination(timeout), "the AvailableNow run did not end"
    assert q.exception() is None


async def _poll_for(bootstrap: str, group: str, topic: str, seconds: float) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    async with ShareConsumer(bootstrap, group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got.extend(await consumer.poll(0.3))
        # explicit mode, nothing acknowledged: close() releases whatever came
    return got


def _unacknowledged(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's records of `topic` not yet accepted or archived (acquired, released or never
    delivered), as DescribeShareGroupOffsets counts them: 0 means nothing is left, without
    waiting for a poll to come back empty. None while the group has not started a partition."""

    async def ask() -> int | None:
        async with Admin(bootstrap) as admin:
            return await backlog(admin, group, (topic,))

    return asyncio.run(ask())


# -- registration ---------------------------------------------------------------------------


def test_short_name_needs_no_registration(spark: Any, broker: BrokerProcess) -> None:
    """Spark's lookup of `pyspark_*` modules finds the shim (see spark/README.md)."""
    create_topic(broker.bootstrap, "lookup", 1)
    produce(broker.bootstrap, "lookup", 3)
    df = spark.read.format("shoal").option("bootstrap.servers", broker.bootstrap)
    assert df.option("subscribe", "lookup").load().count() == 3


@pytest.fixture(scope="module")
def source(spark: Any) -> Any:
    spark.dataSource.register(ShoalDataSource)
    return spark


# -- batch read and write -------------------------------------------------------------------


def test_batch_write_then_read_round_trip(source: Any, broker: BrokerProcess) -> None:
    spark = source
    create_topic(broker.bootstrap, "roundtrip", 3)
    rows = [
        (f"k{i}".encode(), f"value-{i}".encode(), [("h", str(i).encode()), ("z", None)], i % 3)
        for i in range(300)
    ]
    df = spark.createDataFrame(
        rows,
        "key binary, value binary, headers array<struct<key:string,value:binary>>, partition int",
    )
    before = int(time.time() * 1000)
    df.write.format("shoal").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", "roundtrip"
    ).mode("append").save()

    def read(**options: str) -> Any:
        r = spark.read.format("shoal").option("kafka.bootstrap.servers", broker.bootstrap)
        for k, v in {"subscribe": "roundtrip", **options}.items():
            r = r.option(k, v)
        return r.load()

    back = read().collect()
    assert sorted((r.key, r.value, r.partition) for r in back) == sorted(
        (k, v, p) for k, v, _, p in rows
    )
    one = next(r for r in back if r.value == b"value-7")
    assert [(h.key, h.value) for h in one.headers] == [("h", b"7"), ("z", None)]
    assert one.deliveryCount is None  # not read through a share group
    assert one.timestamp.timestamp() * 1000 >= before - 1000
    assert {r.offset for r in back if r.partition == 0} == set(range(100))

    # Offsets as JSON (-2 earliest, -1 latest) and by time.
    ranged = read(
        startingOffsets=json.dumps({"roundtrip": {"0": 10, "1": -2, "2": -1}}),
        endingOffsets=json.dumps({"roundtrip": {"0": 20, "1": 5, "2": -1}}),
    ).collect()
    assert sorted((r.partition, r.offset) for r in ranged) == [(0, o) for o in range(10, 20)] + [
        (1, o) for o in range(5)
    ]
    assert read(startingTimestamp=str(int(time.time() * 1000) + 60_000)).count() == 0
    assert read(startingTimestamp=str(before - 60_000)).count() == 300

    # A string value column, keyless rows, default partitioning, and writeStream.
    plain = spark.createDataFrame([(f"s{i}",) for i in range(10)], "value string")
    plain.write.format("shoal").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", "roundtrip"
    ).mode("append").save()
    assert read(startingOffsets="latest").count() == 0
    assert read().count() == 310


# -- streaming through a share group --------------------------------------------------------


def test_stream_reads_every_record_once_then_nothing_is_left(
    source: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    spark = source
    total = 20_000  # three micro-batches over four partitions
    create_topic(broker.bootstrap, "big", 4)
    produce(broker.bootstrap, "big", total, partitions=4, batch=500)
    configure_group(broker.bootstrap, "big-group")
    df = _stream(spark, broker, "big", "big-group", maxRecordsPerTrigger=8_000)
    q = (
        df.writeStream.format("memory")
        .queryName("big_out")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck1"))
        .start()
    )
    assert q.awaitTermination(180)
    assert q.exception() is None
    out = spark.sql("select partition, offset, value, deliveryCount from big_out")
    assert out.count() == total
    assert out.select("partition", "offset").distinct().count() == total
    assert out.where("deliveryCount != 1").count() == 0
    values = {r.value for r in out.select("value").collect()}
    assert values == {f"v{i}".encode() for i in range(total)}

    # A second run (its own checkpoint, same group) finds everything acknowledged.
    again = Collector()
    _run_available_now(_stream(spark, broker, "big", "big-group"), again, tmp_path / "ck2")
    assert again.rows == []


def test_two_queries_in_one_group_split_the_records(
    source: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    spark = source
    total = 4000  # sixteen micro-batches between the two
    create_topic(broker.bootstrap, "split", 2)
    produce(broker.bootstrap, "split", total, partitions=2)
    configure_group(broker.bootstrap, "split-group")
    sinks = [Collector(), Collector()]
    queries = [
        _stream(spark, broker, "split", "split-group", maxRecordsPerTrigger=250)
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
        while _unacknowledged(broker.bootstrap, "split-group", "split") != 0:
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
    assert _unacknowledged(broker.bootstrap, "split-group", "split") == 0  # none released


def test_two_available_now_queries_in_one_group_share_the_work(
    source: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """Each query waits until nobody in the group holds or can get a record below the end
    offsets noted at its start, instead of ending on its first empty poll."""
    spark = source
    total = 1200
    create_topic(broker.bootstrap, "drain", 2)
    produce(broker.bootstrap, "drain", total, partitions=2)
    configure_group(broker.bootstrap, "drain-group")

    def slow(df: Any, batch_id: int) -> None:
        time.sleep(0.3)  # keeps the first query busy while the second joins

    sinks = [Collector(before=slow), Collector(before=slow)]
    queries = [
        _stream(spark, broker, "drain", "drain-group", maxOffsetsPerTrigger=300)
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
    assert _unacknowledged(broker.bootstrap, "drain-group", "drain") == 0


@pytest.mark.parametrize("limit", [250, 5000])
def test_micro_batches_follow_the_read_limit_within_one_stored_batch(
    source: Any, broker: BrokerProcess, tmp_path: Path, limit: int
) -> None:
    """Spark's `maxOffsetsPerTrigger` spelling; stored batches of 100 records, 4 partitions
    (the group lets 2,000 records of each be in flight, more than one batch needs)."""
    spark = source
    topic, group, total = f"limit-{limit}", f"limit-group-{limit}", 3 * limit + 1000
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, total, partitions=4, batch=100)
    configure_group(broker.bootstrap, group)
    df = _stream(spark, broker, topic, group, maxOffsetsPerTrigger=limit, numPartitions=2)
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
    assert all(n < limit + 100 for n in sizes), sizes
    assert all(n > limit - 100 for n in sizes[:-1]), sizes


def test_tasks_that_fetch_their_ranges_read_every_record(
    source: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """dataPath=fetch: the driver hands out ranges only, the tasks read them by offset."""
    spark = source
    create_topic(broker.bootstrap, "ranges", 2)
    produce(broker.bootstrap, "ranges", 2000, partitions=2, batch=100)
    configure_group(broker.bootstrap, "ranges-group")
    sink = Collector()
    df = _stream(
        spark, broker, "ranges", "ranges-group", dataPath="fetch", numPartitions=3,
        maxRecordsPerTrigger=700,
    )  # fmt: skip
    _run_available_now(df, sink, tmp_path / "ck")
    rows = sink.rows
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (i % 2, i // 2) for i in range(2000)
    )
    assert {r.value for r in rows} == {f"v{i}".encode() for i in range(2000)}
    assert {r.deliveryCount for r in rows} == {1}


def test_failed_batch_comes_back_with_delivery_count_two(
    source: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    spark = source
    from pyspark.sql import functions as F

    create_topic(broker.bootstrap, "fail", 1)
    produce(broker.bootstrap, "fail", 3000, batch=100)
    configure_group(broker.bootstrap, "fail-group")
    flag = tmp_path / "fail-now"
    flag.touch()
    flag_path = str(flag)

    def check(offset: int) -> bool:
        import os

        if offset == 1500 and os.path.exists(flag_path):
            raise RuntimeError("poison at offset 1500")
        return True

    checked = F.udf(check, "boolean", useArrow=False)
    df = _stream(spark, broker, "fail", "fail-group", maxRecordsPerTrigger=1000)
    df = df.withColumn("ok", checked(F.col("offset")))
    sink = Collector()
    checkpoint = tmp_path / "ck"
    q = df.writeStream.foreachBatch(sink).trigger(availableNow=True)
    q = q.option("checkpointLocation", str(checkpoint)).start()
    with pytest.raises(Exception, match="poison at offset 1500"):
        q.awaitTermination(120)
    assert sorted(o for _, _, o in sink.offsets()) == list(range(1000))

    flag.unlink()  # the restarted query gets past the record
    _run_available_now(df, sink, checkpoint)
    rows = sink.rows
    assert sorted(r.offset for r in rows) == list(range(3000)), "a record was lost or doubled"
    twice = sorted(r.offset for r in rows if r.deliveryCount == 2)
    assert twice == list(range(1000, 2000))
    assert all(r.deliveryCount == 1 for r in rows if not 1000 <= r.offset < 2000)


@pytest.mark.parametrize("renew", [True, False], ids=["renew", "control-no-renew"])
def test_slow_batch_keeps_its_records_by_renewing_locks(
    source: Any, broker: BrokerProcess, tmp_path: Path, renew: bool
) -> None:
    """Group lock 2 s, a batch that takes 4 s: RENEW keeps every record with this query. The
    control renews too late, and the rival member does get the records."""
    spark = source
    topic, group = f"slow-{renew}", f"slow-group-{renew}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 200)
    configure_group(broker.bootstrap, group, share_record_lock_duration_ms="2000")
    started = threading.Event()

    def slow(df: Any, batch_id: int) -> None:
        if not started.is_set():  # the first batch only
            started.set()
            time.sleep(4)  # 2 lock durations

    stolen: list[ConsumerRecord] = []

    def rival() -> None:
        if started.wait(60):
            stolen.extend(asyncio.run(_poll_for(broker.bootstrap, group, topic, 3.5)))

    thief = threading.Thread(target=rival)
    thief.start()
    sink = Collector(before=slow)
    options = {} if renew else {"renewIntervalMs": 600_000}
    df = _stream(spark, broker, topic, group, **options)
    try:
        _run_available_now(df, sink, tmp_path / "ck")
    finally:
        started.set()
        thief.join(30)
    if not renew:
        assert stolen, "the control lost no record: the test cannot tell RENEW works"
        return
    assert stolen == [], f"another member got {len(stolen)} records of the running batch"
    assert sorted(o for _, _, o in sink.offsets()) == list(range(200))
    assert {r.deliveryCount for r in sink.rows} == {1}
    assert _unacknowledged(broker.bootstrap, group, topic) == 0


def test_shoal_ack_rejects_or_releases_failed_rows(
    source: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    spark = source
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
    df = _stream(spark, broker, "verdicts", "verdicts-group", ackDir=ack_dir)
    _run_available_now(df, sink, tmp_path / "ck")
    seen: dict[bytes, list[int]] = {}
    for r in sink.rows:
        seen.setdefault(r.value, []).append(r.deliveryCount)
    assert sorted(seen[b"v7"]) == [1, 2, 3]  # released until the delivery-count limit
    assert seen[b"v8"] == [1]  # rejected: archived at once
    assert all(counts == [1] for v, counts in seen.items() if v not in (b"v7", b"v8"))
    assert len(seen) == 100
    assert list(Path(ack_dir).glob("*.json")) == []
    again = Collector()
    _run_available_now(
        _stream(spark, broker, "verdicts", "verdicts-group"), again, tmp_path / "ck2"
    )
    assert again.rows == []
