"""One broker process per Spark test module, and one local SparkSession for all of them.

Spark's Python workers are separate processes, so the broker is a `shoal serve` child process
(`BrokerProcess`), not an in-process server. Starting Spark takes seconds: share the session.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from client import Admin
from client import ConfigResourceType
from client import Producer
from client import Record
from tests.brokers import BrokerProcess
from tests.spark.jvm import ROOT
from tests.spark.jvm import WORKER_SITE
from tests.spark.jvm import ArchiveWriter
from tests.spark.jvm import class_archive
from tests.spark.jvm import jvm_env

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def broker(module_broker_process: BrokerProcess) -> BrokerProcess:
    """The module's broker process (tests/conftest.py), with the broker's defaults."""
    return module_broker_process


@pytest.fixture(scope="session")
def driver_env() -> dict[str, str]:
    """What a Spark driver started by a test adds to its environment: the JVM settings and
    the class archive if there is one (jvm.py)."""
    return jvm_env(class_archive())


def session_builder() -> Any:
    """The tests' local session: two cores, no UI, and settings that make small queries quick."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("shoal-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.pollingDelay", "10ms")
        .config("spark.python.worker.reuse", "true")
    )


@pytest.fixture(scope="session")
def spark(driver_env: dict[str, str]) -> Iterator[Any]:
    writer = ArchiveWriter.start()  # None if there is an archive or another writer
    env = writer.env() if writer is not None else driver_env
    names = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", *env)
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update(env)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # The repository root holds pyspark_shoal.py, which Spark's lookup finds for "shoal";
    # WORKER_SITE has the workers import PySpark from site-packages (see its sitecustomize).
    paths = [str(ROOT), str(WORKER_SITE), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    session = session_builder().getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    jvm = session.sparkContext._gateway.proc
    try:
        yield session
    finally:
        session.stop()
        if writer is not None:
            writer.finish(jvm)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _create(bootstrap: str, topic: str, partitions: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    run(_create(bootstrap, topic, partitions))


async def _produce(
    bootstrap: str, topic: str, count: int, partitions: int, batch: int, prefix: str
) -> None:
    async with Producer(bootstrap) as producer:
        sends = []
        for p in range(partitions):
            mine = range(p, count, partitions)
            for lo in range(0, len(mine), batch):
                records = [
                    Record(f"{prefix}{i}".encode(), f"k{i}".encode(), (("n", str(i).encode()),))
                    for i in mine[lo : lo + batch]
                ]
                sends.append(producer.send_batch(topic, p, records))
        await asyncio.gather(*sends)


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    partitions: int = 1,
    batch: int = 100,
    prefix: str = "v",
) -> None:
    """`count` records: value `{prefix}{i}`, key `k{i}`, header n=i; record i on partition
    i % partitions, in batches of `batch` records."""
    run(_produce(bootstrap, topic, count, partitions, batch, prefix))


async def _group_config(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    async with Admin(bootstrap) as admin:
        await admin.incremental_alter_configs(ConfigResourceType.GROUP, group, configs)


def configure_group(bootstrap: str, group: str, **configs: str) -> None:
    """Group configs, e.g. share_auto_offset_reset="earliest" (underscores become dots)."""
    values = {k.replace("_", "."): v for k, v in configs.items()}
    values.setdefault("share.auto.offset.reset", "earliest")
    run(_group_config(bootstrap, group, values))
