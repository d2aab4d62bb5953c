"""Options through a real Spark session: what a user reads when one is wrong, and the Spark
Kafka source's names for choosing partitions and columns."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

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
