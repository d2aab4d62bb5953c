"""`kafka.isolation.level` in the shoal Spark source, over logs a real transactional producer
(confluent-kafka) wrote (`tests.compat.support.write_transactions`: committed, aborted with a
plain record inside, one left open, one committed past it).

A batch read at read_committed ends at the last stable offset ("latest" is the LSO, as
ListOffsets answers a read_committed client, KIP-98) and drops the aborted records, as Kafka's
consumer does (`CompletedFetch`); read_uncommitted, the default (Spark's Kafka source leaves
`isolation.level` to the Kafka consumer, whose default it is), reads everything.

A stream reads through a share group, whose isolation is the group's config
`share.isolation.level` (KIP-932, Kafka's `GroupConfig.SHARE_ISOLATION_LEVEL_CONFIG`): asked
read_committed, the source sets it before its first fetch, so the broker acquires nothing at or
past the LSO and archives aborted records (`SharePartition.acquire`); the source's latest offsets
(the progress's, and the ends a Trigger.AvailableNow run drains to) are the LSO.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client import Admin
from client import ConfigResourceType
from spark.progress import positions_of
from tests.brokers import BrokerProcess
from tests.compat.support import COMMITTED
from tests.compat.support import EVERYTHING
from tests.compat.support import QUIET
from tests.compat.support import write_transactions
from tests.spark.conftest import configure_group
from tests.spark.conftest import create_topic
from tests.spark.queries import Collector
from tests.spark.queries import stream

pytestmark = pytest.mark.spark

TOPIC = "ledger"
READ_COMMITTED = {"kafka.isolation.level": "read_committed"}


@pytest.fixture(scope="module")
def written(broker: BrokerProcess) -> Iterator[str]:
    create_topic(broker.bootstrap, TOPIC, 1)
    open_one = write_transactions(broker.bootstrap, TOPIC)
    yield broker.bootstrap
    open_one.abort_transaction(30)


def _isolation_of(bootstrap: str, group: str) -> str | None:
    async def ask() -> str | None:
        async with Admin(bootstrap) as admin:
            found = await admin.describe_configs(
                ConfigResourceType.GROUP, group, ("share.isolation.level",)
            )
        return found.get("share.isolation.level")

    return asyncio.run(ask())


def _lso(bootstrap: str, topic: str) -> int:
    async def ask() -> int:
        async with Admin(bootstrap) as admin:
            return await admin.list_offsets(topic, 0, "latest", 1)

    return asyncio.run(ask())


def test_batch_read_committed_reads_exactly_the_committed_records(spark: Any, written: str) -> None:
    def values(**options: str) -> list[str]:
        df = spark.read.format("shoal").options(
            **{"kafka.bootstrap.servers": written, "subscribe": TOPIC}, **options
        )
        rows = df.load().select("offset", "value").collect()
        return [r.value.decode() for r in sorted(rows, key=lambda r: r.offset)]

    assert values(**READ_COMMITTED) == COMMITTED
    assert values() == EVERYTHING


@pytest.mark.parametrize("data_path", ["ship", "fetch"])
def test_available_now_read_committed_drains_to_the_lso_and_reads_only_committed(
    spark: Any, broker: BrokerProcess, written: str, tmp_path: Path, data_path: str
) -> None:
    """The group's isolation is left at its default: the source sets it. The run ends once the
    group is drained below the LSO (the open transaction's first offset), not the log end,
    which the group could never reach while the transaction stays open. Both data paths: the
    driver's shipped batches, and tasks that fetch their acquired ranges by offset."""
    group = f"ledger-rc-{data_path}"
    configure_group(written, group)  # share.auto.offset.reset=earliest only
    sink = Collector()
    df = stream(spark, broker, TOPIC, group, dataPath=data_path, **READ_COMMITTED)
    q = df.writeStream.foreachBatch(sink).trigger(availableNow=True)
    q = q.option("checkpointLocation", str(tmp_path / "ck")).start()
    assert q.awaitTermination(60), "the run waited past the LSO"
    assert q.exception() is None
    assert [r.value.decode() for r in sorted(sink.rows, key=lambda r: r.offset)] == COMMITTED
    assert _isolation_of(written, group) == "read_committed"
    latest = [json.loads(p["sources"][0]["latestOffset"]) for p in q.recentProgress]
    assert latest and positions_of(latest[-1])[(TOPIC, 0)] == _lso(written, TOPIC)


def test_a_running_stream_outputs_exactly_the_committed_records(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    """A transactional producer commits some transactions and aborts others, with plain
    records between them and one transaction held open while the stream reads past it on
    another partition, as the stream runs: the stream's output is exactly the committed and
    plain records, each once, in log order."""
    from confluent_kafka import Producer

    topic, group = "ledger-live", "ledger-live-group"
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic, 2)
    configure_group(bootstrap, group)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "live-writer", **QUIET})
    txn.init_transactions(30)
    plain = Producer({"bootstrap.servers": bootstrap, **QUIET})

    def send(producer: Any, value: str, partition: int = 0) -> None:
        producer.produce(topic, value=value.encode(), partition=partition)
        assert producer.flush(30) == 0

    def transaction(values: list[str], commit: bool) -> None:
        txn.begin_transaction()
        for v in values:
            send(txn, v)
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)

    sink = Collector()
    df = stream(spark, broker, topic, group, pollTimeoutMs=200, **READ_COMMITTED)
    q = df.writeStream.foreachBatch(sink).trigger(processingTime="100 milliseconds")
    q = q.option("checkpointLocation", str(tmp_path / "ck")).start()

    def seen() -> set[str]:
        return {r.value.decode() for r in sink.rows}

    def wait_for(values: set[str]) -> None:
        deadline = time.monotonic() + 60
        while not values <= seen():
            assert q.exception() is None, q.exception()
            assert time.monotonic() < deadline, f"never read {sorted(values - seen())}"
            time.sleep(0.05)

    committed: list[str] = []
    try:
        for i in range(3):
            transaction([f"c{i}a", f"c{i}b"], commit=True)
            transaction([f"x{i}a", f"x{i}b"], commit=False)
            send(plain, f"p{i}")
            committed += [f"c{i}a", f"c{i}b", f"p{i}"]
            wait_for(set(committed))  # the stream reads as the producer writes
        txn.begin_transaction()
        send(txn, "held")  # open: the LSO stays here while the stream runs on
        send(plain, "after-held")
        send(plain, "beacon", partition=1)  # read: the stream ran on after the two above
        wait_for({"beacon"})
        assert "held" not in seen() and "after-held" not in seen()
        txn.commit_transaction(30)
        committed += ["held", "after-held"]
        wait_for(set(committed))
        transaction(["x-last"], commit=False)
        transaction(["c-last"], commit=True)
        committed.append("c-last")
        wait_for(set(committed))
    finally:
        q.stop()
    rows = sorted(sink.rows, key=lambda r: (r.partition, r.offset))
    values = [r.value.decode() for r in rows if r.partition == 0]
    assert values == committed  # in log order, each once, no aborted record
    assert [r.value for r in rows if r.partition == 1] == [b"beacon"]
    assert _isolation_of(bootstrap, group) == "read_committed"
