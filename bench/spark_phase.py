"""The `spark` bench phase: records/s through the `shoal` PySpark source.

A streaming query reads a share group (AvailableNow, `maxRecordsPerTrigger` 50,000, group lock
window raised to the broker's maximum) into Spark's `noop` sink with 1 and then 4 reader
partitions (`numPartitions`), beside the same topic read by the batch reader (plain Fetch) into
`noop`. Each row is timed from `start()` (or the action) to the end of the run, so it includes
Spark's per-query and per-batch overhead, as a user would see it. One local SparkSession
(`local[*]`) is made on first use and kept for the repeats.

Register it by importing this module after `bench.phases` defines the registry.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any

from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase

_SESSION: Any = None
_TOPIC = "bench-spark"
_MAX_RECORDS_PER_TRIGGER = 50_000


def _spark() -> Any:
    global _SESSION
    if _SESSION is None:
        from pyspark.sql import SparkSession

        from spark import ShoalDataSource

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        _SESSION = (
            SparkSession.builder.master("local[*]")
            .appName("shoal-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate()
        )
        _SESSION.sparkContext.setLogLevel("ERROR")
        _SESSION.dataSource.register(ShoalDataSource)
    return _SESSION


def _stream_run(b: Bench, readers: int) -> Row:
    spark = _spark()
    group = f"bench-spark-{readers}-{time.time_ns()}"
    b.set_group_config(group, "share.auto.offset.reset", "earliest")
    b.set_group_config(group, "share.partition.max.record.locks", "4000")
    df = (
        spark.readStream.format("shoal")
        .option("kafka.bootstrap.servers", b.broker.bootstrap)
        .option("subscribe", _TOPIC)
        .option("group", group)
        .option("maxRecordsPerTrigger", str(_MAX_RECORDS_PER_TRIGGER))
        .option("numPartitions", str(readers))
        .load()
    )
    checkpoint = tempfile.mkdtemp(prefix="shoal-bench-spark-")
    cpu0 = b.broker.cpu_seconds()
    start = time.monotonic()
    q = (
        df.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    q.awaitTermination(600)
    seconds = time.monotonic() - start
    shutil.rmtree(checkpoint, ignore_errors=True)
    cpu = b.broker.cpu_seconds() - cpu0
    progress = q.recentProgress
    records = sum(p["numInputRows"] for p in progress)
    batches = sum(1 for p in progress if p["numInputRows"])
    expected = b.topics[_TOPIC]
    note = f"{batches} batches"
    if records != expected:
        note += f"; INCOMPLETE: {records} of {expected}"
    if q.exception() is not None:
        note += f"; failed: {q.exception()}"
    return Row(
        key=f"spark-stream-{readers}",
        label=f"spark readStream, share group, numPartitions={readers}",
        records=records,
        seconds=seconds,
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note=note,
    )


def _batch_run(b: Bench) -> Row:
    spark = _spark()
    cpu0 = b.broker.cpu_seconds()
    start = time.monotonic()
    df = (
        spark.read.format("shoal")
        .option("kafka.bootstrap.servers", b.broker.bootstrap)
        .option("subscribe", _TOPIC)
        .load()
    )
    df.write.format("noop").mode("overwrite").save()
    seconds = time.monotonic() - start
    records = b.topics[_TOPIC]
    return Row(
        key="spark-batch",
        label=f"spark read (plain Fetch), {b.partitions} partitions",
        records=records,
        seconds=seconds,
        broker_cpu_s=b.broker.cpu_seconds() - cpu0,
        value_bytes=b.value_size,
    )


@phase("spark", "the shoal PySpark source: readStream with 1 and 4 readers, and spark.read")
def spark_phase(b: Bench) -> list[Row]:
    if _TOPIC not in b.topics:  # made once; every run uses a new group
        b.produce(_TOPIC, b.share_records)
    return [_stream_run(b, 1), _stream_run(b, 4), _batch_run(b)]
