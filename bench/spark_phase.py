"""The `spark` bench phase: records/s through the `shoal` PySpark source, against floors.

The floors are trivial Python data sources with the same schema (`bench.spark_floors`): a
streaming one that yields pre-built Arrow batches in micro-batches of the same size, and a
batch one; so the ratios say how much of Spark's own cost for a Python source Shoal adds.
For `numPartitions` 1, 2 and 4 (Spark tasks per micro-batch / per read) it times:

- a streaming query over a share group with spark/README.md's settings (AvailableNow,
  `maxRecordsPerTrigger` 10,000, the broker's and the group's defaults: Kafka's lock window of
  2,000 records per partition) into Spark's `noop` sink, and the streaming floor with the same
  read limit (`perBatch`) and tasks;
- `spark.read` of the whole topic (plain Fetch by offsets) into `noop`, and the batch floor.

Plus the stream with `dataPath=fetch` (tasks fetch their ranges themselves) at 4 tasks, and
topics written by librdkafka with lz4 and zstd compression read back by stream and batch.
Each row is timed from `start()` (or the action) to the end of the run, so it includes Spark's
per-query and per-batch overhead, as a user would see it. One local SparkSession (`local[*]`)
is made on first use and kept for the repeats.

Register it by importing this module after `bench.phases` defines the registry.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from bench.workers import produce_untimed

_SESSION: Any = None
_TOPIC = "bench-spark"
_PER_TRIGGER = 10_000  # spark/README.md's maxRecordsPerTrigger
_TASKS = (1, 2, 4)
_CODECS = ("lz4", "zstd")
_CODEC_RECORDS = 100_000


def _spark() -> Any:
    global _SESSION
    if _SESSION is None:
        from pyspark.sql import SparkSession

        from bench.spark_floors import FloorSource
        from spark import ShoalDataSource

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        # The Python workers import bench.spark_floors by name: the repository root.
        root = str(Path(__file__).resolve().parents[1])
        paths = [root, os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        _SESSION = (
            SparkSession.builder.master("local[*]")
            .appName("shoal-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.python.worker.reuse", "true")
            .config("spark.ui.showConsoleProgress", "false")
            # recentProgress keeps this many updates (Spark's default is 100): the rows count
            # their records from it, and a run at 10,000 records per trigger has 100 batches.
            .config("spark.sql.streaming.numRecentProgressUpdates", "10000")
            .getOrCreate()
        )
        _SESSION.sparkContext.setLogLevel("ERROR")
        _SESSION.dataSource.register(ShoalDataSource)
        _SESSION.dataSource.register(FloorSource)
    return _SESSION


def _timed_stream(df: Any) -> tuple[float, int, int, str]:
    """Run `df` to `noop` with AvailableNow: seconds, rows, non-empty batches, error."""
    checkpoint = tempfile.mkdtemp(prefix="shoal-bench-spark-")
    start = time.monotonic()
    q = (
        df.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    with contextlib.suppress(Exception):  # a failed query is reported from q.exception()
        q.awaitTermination(900)
    seconds = time.monotonic() - start
    shutil.rmtree(checkpoint, ignore_errors=True)
    progress = q.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    batches = sum(1 for p in progress if p["numInputRows"])
    failure = q.exception()
    error = f"; failed: {str(failure).splitlines()[0]}" if failure is not None else ""
    return seconds, rows, batches, error


def _shoal_stream(b: Bench, topic: str, tasks: int, data_path: str = "ship") -> Any:
    group = f"bench-spark-{tasks}-{time.time_ns()}"
    b.set_group_config(group, "share.auto.offset.reset", "earliest")
    return (
        _spark()
        .readStream.format("shoal")
        .option("kafka.bootstrap.servers", b.broker.bootstrap)
        .option("subscribe", topic)
        .option("group", group)
        .option("maxRecordsPerTrigger", str(_PER_TRIGGER))
        .option("numPartitions", str(tasks))
        .option("dataPath", data_path)
        .load()
    )


def _stream_row(b: Bench, tasks: int, data_path: str = "ship") -> Row:
    cpu0 = b.broker.cpu_seconds()
    seconds, records, batches, error = _timed_stream(_shoal_stream(b, _TOPIC, tasks, data_path))
    expected = b.topics[_TOPIC]
    note = f"{batches} batches{error}"
    if records != expected:
        note += f"; INCOMPLETE: {records} of {expected}"
    suffix = "" if data_path == "ship" else f"-{data_path}"
    return Row(
        key=f"spark-stream{suffix}-{tasks}",
        label=f"spark readStream, share group, dataPath={data_path}, numPartitions={tasks}",
        records=records,
        seconds=seconds,
        broker_cpu_s=b.broker.cpu_seconds() - cpu0,
        value_bytes=b.value_size,
        note=note,
    )


def _floor(b: Bench, reader: Any, tasks: int) -> Any:
    return (
        reader.format("shoal_floor")
        .option("records", str(b.topics[_TOPIC]))
        .option("perBatch", str(_PER_TRIGGER))
        .option("numPartitions", str(tasks))
        .option("valueSize", str(b.value_size))
        .load()
    )


def _stream_floor_row(b: Bench, tasks: int) -> Row:
    seconds, records, batches, error = _timed_stream(_floor(b, _spark().readStream, tasks))
    return Row(
        key=f"spark-stream-floor-{tasks}",
        label=f"floor: trivial Python stream of Arrow batches, numPartitions={tasks}",
        records=records,
        seconds=seconds,
        broker_cpu_s=0.0,
        value_bytes=b.value_size,
        note=f"{batches} batches{error}",
    )


def _timed_read(df: Any) -> float:
    start = time.monotonic()
    df.write.format("noop").mode("overwrite").save()
    return time.monotonic() - start


def _shoal_read(b: Bench, topic: str, tasks: int) -> Any:
    return (
        _spark()
        .read.format("shoal")
        .option("kafka.bootstrap.servers", b.broker.bootstrap)
        .option("subscribe", topic)
        .option("numPartitions", str(tasks))
        .load()
    )


def _batch_row(b: Bench, tasks: int) -> Row:
    cpu0 = b.broker.cpu_seconds()
    seconds = _timed_read(_shoal_read(b, _TOPIC, tasks))
    return Row(
        key=f"spark-batch-{tasks}",
        label=f"spark read (plain Fetch), numPartitions={tasks}",
        records=b.topics[_TOPIC],
        seconds=seconds,
        broker_cpu_s=b.broker.cpu_seconds() - cpu0,
        value_bytes=b.value_size,
    )


def _batch_floor_row(b: Bench, tasks: int) -> Row:
    seconds = _timed_read(_floor(b, _spark().read, tasks))
    return Row(
        key=f"spark-batch-floor-{tasks}",
        label=f"floor: trivial Python batch source of Arrow batches, numPartitions={tasks}",
        records=b.topics[_TOPIC],
        seconds=seconds,
        broker_cpu_s=0.0,
        value_bytes=b.value_size,
    )


def _produce_compressed(b: Bench, topic: str, codec: str) -> None:
    b.create_topic(topic)
    producer = Producer(
        {
            "bootstrap.servers": b.broker.bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "batch.num.messages": 2000,
            "log_level": 3,  # no warnings while the new topic's leaders are being elected
        }
    )
    value = b"v" * b.value_size
    produce_untimed(producer, topic, _CODEC_RECORDS, value, b.partitions, key=lambda i: b"%d" % i)
    b.topics[topic] = _CODEC_RECORDS


def _codec_row(b: Bench, codec: str) -> Row:
    """A topic librdkafka wrote with `codec`, read back by the stream and by spark.read."""
    topic = f"bench-spark-{codec}"
    if topic not in b.topics:
        _produce_compressed(b, topic, codec)
    cpu0 = b.broker.cpu_seconds()
    seconds, streamed, _, error = _timed_stream(_shoal_stream(b, topic, 4))
    try:
        read = _shoal_read(b, topic, 4).count()
    except Exception as e:  # a reader that cannot decode the codec fails the action
        read, error = 0, f"{error}; read failed: {str(e).splitlines()[0]}"
    notes = [f"stream {streamed:,}, read {read:,} of {_CODEC_RECORDS:,}{error}"]
    if streamed != _CODEC_RECORDS or read != _CODEC_RECORDS:
        notes.append("INCOMPLETE")
    return Row(
        key=f"spark-{codec}",
        label=f"spark readStream of a {codec}-compressed topic, numPartitions=4",
        records=streamed,
        seconds=seconds,
        broker_cpu_s=b.broker.cpu_seconds() - cpu0,
        value_bytes=b.value_size,
        note="; ".join(notes),
    )


def _warm_up(b: Bench) -> None:
    """One unmeasured run of each kind: the first query of a session pays for the JVM's and
    the Python workers' warm-up, which would otherwise land on whichever row runs first."""
    spark = _spark()
    _timed_stream(spark.readStream.format("shoal_floor").option("records", "1000").load())
    _timed_read(spark.read.format("shoal_floor").option("records", "1000").load())
    _timed_read(_shoal_read(b, _TOPIC, 2).limit(1000))


@phase(
    "spark",
    "the shoal PySpark source (stream and batch, 1/2/4 tasks) against trivial Arrow sources",
)
def spark_phase(b: Bench) -> list[Row]:
    if _TOPIC not in b.topics:  # made once; every run uses a new group
        b.produce(_TOPIC, b.records)
        _warm_up(b)
    rows: list[Row] = []
    for tasks in _TASKS:
        rows += [_stream_floor_row(b, tasks), _stream_row(b, tasks)]
    rows.append(_stream_row(b, 4, "fetch"))
    for tasks in _TASKS:
        rows += [_batch_floor_row(b, tasks), _batch_row(b, tasks)]
    rows += [_codec_row(b, codec) for codec in _CODECS]
    return rows


def spark_ratios(by: dict[str, Row]) -> list[str]:
    """Shoal's records/s over the floor's, per kind and number of tasks (goal >= 0.5)."""
    out: list[str] = []
    for kind in ("stream", "batch"):
        for tasks in _TASKS:
            shoal, floor = by.get(f"spark-{kind}-{tasks}"), by.get(f"spark-{kind}-floor-{tasks}")
            if shoal is not None and floor is not None and floor.rate:
                out.append(
                    f"spark {kind} numPartitions={tasks} / trivial Arrow {kind} source "
                    f"records/s = {shoal.rate / floor.rate:.2f} (goal >= 0.5)"
                )
    return out
