"""Options through a real Spark session: what a user reads when one is wrong, and the Spark
Kafka source's names for choosing partitions and columns."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

from client import Producer
from client import Record
from tests.brokers import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark


def _load_error(reader: Any, **options: str) -> str:
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as e:
        reader.load()
    return str(e.value)


def test_a_wrong_option_fails_load_with_a_message_on_top(spark: Any, broker: BrokerProcess) -> None:
    base = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders"}
    shown = _load_error(spark.read.format("shoal"), **base, maxOffsetPerTrigger="5")
    assert "option maxoffsetpertrigger is not supported" in shown, shown
    assert "did you mean maxOffsetsPerTrigger?" in shown, shown
    # Spark prints the worker's traceback: it is the message and the one frame that raised it,
    # not the parser's insides.
    assert len(re.findall(r'^\s*File "', shown, re.MULTILINE)) <= 2, shown
    assert "spark/options.py" not in shown, shown

    shown = _load_error(
        spark.readStream.format("shoal"), **base, group="g", startingOffsets="earliest"
    )
    assert "In a stream, option startingOffsets is not supported" in shown, shown
    assert "share.auto.offset.reset" in shown, shown
    shown = _load_error(
        spark.readStream.format("shoal"), **base, group="g", **{"kafka.sasl.mechanism": "GSSAPI"}
    )
    assert "kafka.sasl.mechanism=GSSAPI is not supported" in shown, shown


def test_assign_and_include_headers_as_in_sparks_kafka_source(
    spark: Any, broker: BrokerProcess
) -> None:
    create_topic(broker.bootstrap, "picked", 3)
    produce(broker.bootstrap, "picked", 30, partitions=3)
    df = (
        spark.read.format("shoal")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("assign", json.dumps({"picked": [2]}))
        .option("includeHeaders", "false")
        .load()
    )
    assert "headers" not in df.columns
    rows = df.select("partition", "offset", "value").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(2, o) for o in range(10)]

    partial = json.dumps({"picked": {"0": 0}})
    with pytest.raises(Exception, match="must name every partition read") as e:
        (
            spark.read.format("shoal")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "picked")
            .option("startingOffsets", partial)
            .load()
            .collect()
        )
    assert "lacks picked-1, picked-2" in str(e.value)


def test_messages_name_the_mistake(spark: Any, broker: BrokerProcess) -> None:
    """Issue 30 item 4: a stream without a group (PySpark's UnboundLocalError no more), a
    stream's option on a batch read, and mode("overwrite"), refused as Spark's Kafka sink
    refuses it (KafkaSourceProvider.createRelation: only Append and ErrorIfExists)."""
    create_topic(broker.bootstrap, "told", 1)
    produce(broker.bootstrap, "told", 3)
    base = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "told"}
    reader = spark.readStream.format("shoal")
    for k, v in base.items():
        reader = reader.option(k, v)
    q = reader.load().writeStream.format("noop").trigger(availableNow=True).start()
    try:
        with pytest.raises(Exception) as e:
            q.awaitTermination(120)
    finally:
        q.stop()
    assert "option group (the share group) is required" in str(e.value), str(e.value)
    assert "UnboundLocalError" not in str(e.value), str(e.value)

    shown = _load_error(spark.read.format("shoal"), **base, maxOffsetsPerTrigger="5")
    assert "option maxOffsetsPerTrigger is for streams only" in shown, shown
    assert "is required" not in shown, shown

    out = spark.createDataFrame([("a",)], "value string").selectExpr("CAST(value AS BINARY) value")
    writer = out.write.format("shoal").options(**base).option("topic", "told")
    with pytest.raises(Exception, match="save mode Overwrite is not allowed"):
        writer.mode("overwrite").save()


def test_kafka_settings_of_a_ported_job_are_applied_or_accepted(
    spark: Any, broker: BrokerProcess
) -> None:
    """Issue 30 item 4: a job ported from format("kafka") keeps its kafka.* settings: those
    Shoal's client applies (compression, linger and request timeout on writes, isolation
    level on reads: with no transaction in this topic both levels read everything) and those that
    tune a client Shoal's is not; only what cannot mean anything is refused, with why."""
    create_topic(broker.bootstrap, "ported", 1)
    rows = [(f"k{i}", f"value-{i}" * 10) for i in range(200)]
    out = spark.createDataFrame(rows, "key string, value string").selectExpr(
        "CAST(key AS BINARY) key", "CAST(value AS BINARY) value"
    )
    write = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "topic": "ported",
        "kafka.compression.type": "lz4",
        "kafka.linger.ms": "5",
        "kafka.request.timeout.ms": "20000",
        "kafka.batch.size": "65536",
        "kafka.retries": "3",
        "kafka.enable.idempotence": "false",
    }
    out.write.format("shoal").options(**write).mode("append").save()
    read = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": "ported",
        "kafka.isolation.level": "read_committed",
        "kafka.request.timeout.ms": "20000",
        "kafka.max.poll.records": "500",
        "kafka.fetch.min.bytes": "1",
    }
    got = spark.read.format("shoal").options(**read).load()
    values = sorted(r.value.decode() for r in got.select("value").collect())
    assert values == sorted(v for _, v in rows)

    shown = _load_error(spark.read.format("shoal"), **read, **{"kafka.transactional.id": "t"})
    assert "the writer does not write in transactions" in shown, shown
    bad = {**read, "kafka.isolation.level": "serializable"}
    shown = _load_error(spark.read.format("shoal"), **bad)
    assert "must be read_uncommitted or read_committed" in shown, shown


def test_ending_timestamps_and_min_partitions_as_in_sparks_kafka_source(
    spark: Any, broker: BrokerProcess
) -> None:
    """endingTimestamp / endingOffsetsByTimestamp end a partition before its first record at or
    after the time (the log end when there is none), and minPartitions cuts partitions into at
    least that many tasks (Spark's Kafka source: KafkaSourceProvider, and
    KafkaOffsetRangeCalculator for minPartitions)."""
    create_topic(broker.bootstrap, "timed", 2)
    base_ms = int(time.time() * 1000) - 100_000
    produce_timed(broker.bootstrap, "timed", base_ms, 10)  # record i at base + 1000 i, both
    opts = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "timed"}

    def offsets(**more: str) -> list[tuple[int, int]]:
        df = spark.read.format("shoal").options(**opts, **more).load()
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    assert offsets(endingTimestamp=str(base_ms + 4500)) == [
        (p, o) for p in (0, 1) for o in range(5)
    ]
    by_partition = json.dumps({"timed": {"0": base_ms + 2000, "1": base_ms + 99_000}})
    assert offsets(endingOffsetsByTimestamp=by_partition) == [(0, 0), (0, 1)] + [
        (1, o) for o in range(10)
    ]
    assert offsets(startingTimestamp=str(base_ms + 8000), endingTimestamp=str(base_ms)) == []

    df = spark.read.format("shoal").options(**opts, minPartitions="6").load()
    assert df.rdd.getNumPartitions() == 6
    assert df.count() == 20
    shown = _load_error(spark.read.format("shoal"), **opts, minPartitions="6", numPartitions="2")
    assert "cannot be used together" in shown, shown


def produce_timed(bootstrap: str, topic: str, base_ms: int, count: int) -> None:
    """`count` records in each of partitions 0 and 1, record i stamped base_ms + 1000 i."""

    async def send() -> None:
        async with Producer(bootstrap) as producer:
            for p in (0, 1):
                records = [Record(b"%d" % i, timestamp_ms=base_ms + 1000 * i) for i in range(count)]
                await producer.send_batch(topic, p, records)

    asyncio.run(send())
