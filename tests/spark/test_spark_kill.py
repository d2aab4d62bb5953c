"""At-least-once through kill -9 of the whole Spark driver (JVM, Python workers and the stream
reader's process), then a restart from the same checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess
from tests.spark.conftest import JVM_OPTIONS
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]

_DRIVER = """
import json, os, sys
from pyspark.sql import SparkSession
from spark import ShoalDataSource

bootstrap, topic, group, out, checkpoint, mode = sys.argv[1:]
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
    # Small batches while it runs (it is killed mid-stream); the restart drains the rest at once.
    .option("maxRecordsPerTrigger", "500" if mode == "run" else "5000")
    .option("pollTimeoutMs", "500")
    .load()
)

def sink(batch, batch_id):
    offsets = [r.offset for r in batch.select("offset").collect()]
    path = os.path.join(out, f"{mode}-{batch_id}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(offsets, f)
    os.replace(path + ".tmp", path)

q = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
if mode == "drain":
    q = q.trigger(availableNow=True)
else:
    q = q.trigger(processingTime="200 milliseconds")
q.start().awaitTermination()
"""


def _driver(tmp: Path, broker: BrokerProcess, mode: str) -> subprocess.Popen[bytes]:
    script = tmp / "driver.py"
    script.write_text(_DRIVER)
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        **JVM_OPTIONS,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
    }
    args = [broker.bootstrap, "killed", "killed-group", str(tmp / "out"), str(tmp / "ck"), mode]
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        start_new_session=True,  # its own process group: kill -9 reaches the JVM and workers
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_kill_9_of_the_driver_loses_nothing(broker: BrokerProcess, tmp_path: Path) -> None:
    total = 3000
    create_topic(broker.bootstrap, "killed", 1)
    produce(broker.bootstrap, "killed", total, batch=100)
    # Held locks of the dead driver expire in 2 s; one partition is shared by every member,
    # so the restarted query need not wait for the dead member to leave the group.
    configure_group(broker.bootstrap, "killed-group", share_record_lock_duration_ms="2000")
    out = tmp_path / "out"
    out.mkdir()

    first = _driver(tmp_path, broker, "run")
    try:
        deadline = time.monotonic() + 240
        while len(list(out.glob("run-*.json"))) < 2:
            assert first.poll() is None, "the first driver ended by itself"
            assert time.monotonic() < deadline, "the first driver wrote no 2 batches"
            time.sleep(0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)

    second = _driver(tmp_path, broker, "drain")
    try:
        assert second.wait(300) == 0
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    seen: list[int] = []
    for path in out.glob("*.json"):
        seen.extend(json.loads(path.read_text()))
    assert set(seen) == set(range(total)), f"lost {sorted(set(range(total)) - set(seen))[:10]}"
    assert len(list(out.glob("drain-*.json"))) > 0
