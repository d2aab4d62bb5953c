"""What a failure costs a stream: nothing acknowledged is lost. A kill -9 of the whole Spark
driver (JVM, Python workers and the stream reader's process) and a restart from its checkpoint,
a batch that fails and comes back, and a batch slower than its records' locks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from client import ConsumerRecord
from tests.brokers import BrokerProcess
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce
from tests.spark.queries import Collector
from tests.spark.queries import poll_for
from tests.spark.queries import run_available_now
from tests.spark.queries import stream
from tests.spark.queries import unacknowledged

pytestmark = pytest.mark.spark

# The driver that is killed: its own process (and process group), streaming into files.
_DRIVER = """
import json, os, sys
from pyspark.sql import SparkSession
from spark import ShoalDataSource

bootstrap, topic, group, out, checkpoint = sys.argv[1:]
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
spark.dataSource.register(ShoalDataSource)
df = (
    spark.readStream.format("shoal")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .option("group", group)
    .option("maxRecordsPerTrigger", "500")
    .option("pollTimeoutMs", "500")
    .load()
)

def sink(batch, batch_id):
    offsets = [r.offset for r in batch.select("offset").collect()]
    path = os.path.join(out, f"run-{batch_id}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(offsets, f)
    os.replace(path + ".tmp", path)

q = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
q.trigger(processingTime="200 milliseconds").start().awaitTermination()
"""


def _driver(
    tmp: Path, broker: BrokerProcess, out: Path, checkpoint: Path, driver_env: dict[str, str]
) -> subprocess.Popen[bytes]:
    script = tmp / "driver.py"
    script.write_text(_DRIVER)
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        **driver_env,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
    }
    args = [broker.bootstrap, "killed", "killed-group", str(out), str(checkpoint)]
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        start_new_session=True,  # its own process group: kill -9 reaches the JVM and workers
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_kill_9_of_the_driver_loses_nothing(
    spark: Any, broker: BrokerProcess, tmp_path: Path, driver_env: dict[str, str]
) -> None:
    total = 3000
    create_topic(broker.bootstrap, "killed", 1)
    produce(broker.bootstrap, "killed", total, batch=100)
    # Held locks of the dead driver expire in 2 s; one partition is shared by every member,
    # so the restarted query need not wait for the dead member to leave the group.
    configure_group(broker.bootstrap, "killed-group", share_record_lock_duration_ms="2000")
    out, checkpoint = tmp_path / "out", tmp_path / "ck"
    out.mkdir()

    first = _driver(tmp_path, broker, out, checkpoint, driver_env)
    try:
        deadline = time.monotonic() + 240
        while len(list(out.glob("run-*.json"))) < 2:
            assert first.poll() is None, "the first driver ended by itself"
            assert time.monotonic() < deadline, "the first driver wrote no 2 batches"
            time.sleep(0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)

    # The restart: another driver (this process's session) on the same checkpoint, draining
    # what is left in one batch or two.
    drained = Collector()
    df = stream(spark, broker, "killed", "killed-group", maxRecordsPerTrigger=5000)
    run_available_now(df, drained, checkpoint)
    seen = [o for _, _, o in drained.offsets()]
    assert seen, "the restarted query read nothing: the first was not killed mid-stream"
    for path in out.glob("run-*.json"):
        seen.extend(json.loads(path.read_text()))
    assert set(seen) == set(range(total)), f"lost {sorted(set(range(total)) - set(seen))[:10]}"


def test_failed_batch_comes_back_with_delivery_count_two(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
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
    df = stream(spark, broker, "fail", "fail-group", maxRecordsPerTrigger=1000)
    df = df.withColumn("ok", checked(F.col("offset")))
    sink = Collector()
    checkpoint = tmp_path / "ck"
    q = df.writeStream.foreachBatch(sink).trigger(availableNow=True)
    q = q.option("checkpointLocation", str(checkpoint)).start()
    with pytest.raises(Exception, match="poison at offset 1500"):
        q.awaitTermination(120)
    assert sorted(o for _, _, o in sink.offsets()) == list(range(1000))

    flag.unlink()  # the restarted query gets past the record
    run_available_now(df, sink, checkpoint)
    rows = sink.rows
    assert sorted(r.offset for r in rows) == list(range(3000)), "a record was lost or doubled"
    twice = sorted(r.offset for r in rows if r.deliveryCount == 2)
    assert twice == list(range(1000, 2000))
    assert all(r.deliveryCount == 1 for r in rows if not 1000 <= r.offset < 2000)


def test_a_failing_batch_costs_only_its_poison_record(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """Issue 30: foreachBatch fails on every batch holding the poison record (one among 200),
    and the query is restarted each time, until the group's delivery-count limit (default 5,
    no dead-letter topic) archives it; maxRecordsPerTrigger 1,000. Every good record reaches
    the sink and only the poison one is archived, named by offset in the broker's log. Before,
    the 200 came back in one batch each time and all 200 were archived."""
    topic, group, poison = "poison", "poison-group", 150
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 200, batch=100)
    configure_group(broker.bootstrap, group)
    kept: dict[int, list[int]] = {}

    def sink(df: Any, batch_id: int) -> None:
        offsets = [r.offset for r in df.select("offset").collect()]
        if poison in offsets:
            raise RuntimeError(f"poison record at offset {poison}")
        kept[batch_id] = offsets  # a batch replayed after a restart replaces its attempt

    df = stream(spark, broker, topic, group, maxRecordsPerTrigger=1000)
    failures = 0
    for _ in range(8):  # Spark restarts a failed query from its checkpoint
        q = df.writeStream.foreachBatch(sink).trigger(availableNow=True)
        q = q.option("checkpointLocation", str(tmp_path / "ck")).start()
        with contextlib.suppress(Exception):
            q.awaitTermination(120)
        if q.exception() is None:
            break
        assert "poison record" in str(q.exception())
        failures += 1
    assert failures == 5, "the poison record was not tried exactly up to the limit"
    good = sorted(o for offsets in kept.values() for o in offsets)
    assert good == [o for o in range(200) if o != poison], "a good record was lost or doubled"
    assert unacknowledged(broker.bootstrap, group, topic) == 0
    lines = [
        json.loads(line)
        for line in broker.log_path.read_text().splitlines()
        if "records archived at the delivery-count limit" in line
    ]
    assert [(r["topic"], r["offsets"]) for r in lines if r["group"] == group] == [(topic, "150")]


@pytest.mark.parametrize("renew", [True, False], ids=["renew", "control-no-renew"])
def test_slow_batch_keeps_its_records_by_renewing_locks(
    spark: Any, broker: BrokerProcess, tmp_path: Path, renew: bool
) -> None:
    """Group lock 2 s, a batch that takes 4 s: RENEW keeps every record with this query. The
    control renews too late, and the rival member does get the records."""
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
            stolen.extend(asyncio.run(poll_for(broker.bootstrap, group, topic, 3.5)))

    thief = threading.Thread(target=rival)
    thief.start()
    sink = Collector(before=slow)
    options = {} if renew else {"renewIntervalMs": 600_000}
    df = stream(spark, broker, topic, group, **options)
    try:
        run_available_now(df, sink, tmp_path / "ck")
    finally:
        started.set()
        thief.join(30)
    if not renew:
        assert stolen, "the control lost no record: the test cannot tell RENEW works"
        return
    assert stolen == [], f"another member got {len(stolen)} records of the running batch"
    assert sorted(o for _, _, o in sink.offsets()) == list(range(200))
    assert {r.deliveryCount for r in sink.rows} == {1}
    assert unacknowledged(broker.bootstrap, group, topic) == 0
