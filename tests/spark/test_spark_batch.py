"""Batch reads and writes with the `shoal` PySpark data source, and how Spark finds it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from spark import ShoalDataSource
from tests.brokers import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.conftest import produce

pytestmark = pytest.mark.spark


def test_short_name_needs_no_registration(spark: Any, broker: BrokerProcess) -> None:
    """Spark's lookup of `pyspark_*` modules finds the shim (see spark/README.md); registering
    the class yourself works too. No other test registers it (they all use the lookup), so this
    session has not registered it before the first read here."""
    create_topic(broker.bootstrap, "lookup", 1)
    produce(broker.bootstrap, "lookup", 3)
    df = spark.read.format("shoal").option("bootstrap.servers", broker.bootstrap)
    assert df.option("subscribe", "lookup").load().count() == 3
    spark.dataSource.register(ShoalDataSource)
    df = spark.read.format("shoal").option("bootstrap.servers", broker.bootstrap)
    assert df.option("subscribe", "lookup").load().count() == 3


def test_batch_write_then_read_round_trip(spark: Any, broker: BrokerProcess) -> None:
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
