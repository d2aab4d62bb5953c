"""The Spark source's planning against a real broker, without Spark: where a batch read starts
and ends (`spark.offsets`) and what the stream asks about its group (`spark.group_state`)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from broker.server import Server
from client.admin import Admin
from client.admin import ConfigResourceType
from client.producer import Producer
from client.records import Record
from tests.integration.admin_support import consume_all

pytest.importorskip("pyspark")  # spark/__init__ imports the data source, which needs PySpark

from spark.group_state import MinRecordsGate
from spark.group_state import backlog
from spark.group_state import nothing_read_warning
from spark.group_state import starts_at_log_end
from spark.offsets import plan_ranges
from spark.options import BatchOptions
from spark.options import OptionError

pytestmark = pytest.mark.integration


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


async def _topics(bootstrap: str, **partitions: int) -> None:
    """Each topic with its partitions, 10 records in each partition."""
    async with Admin(bootstrap) as admin, Producer(bootstrap) as producer:
        for topic, n in partitions.items():
            await admin.create_topic(topic, n)
            for p in range(n):
                records = [Record(b"v%d" % i) for i in range(10)]
                await producer.send_batch(topic, p, records)


async def _plan(bootstrap: str, **options: str) -> list[tuple[str, int, int, int]]:
    opts = BatchOptions.parse({"kafka.bootstrap.servers": bootstrap, **options})
    async with Admin(bootstrap) as admin:
        ranges = await plan_ranges(admin, opts)
    return [(r.topic, r.partition, r.start, r.end) for r in ranges]


async def test_json_offsets_must_name_every_partition_and_stay_in_the_log(broker: Server) -> None:
    b = _bootstrap(broker)
    await _topics(b, orders=2)
    both = json.dumps({"orders": {"0": 3, "1": -2}})
    assert await _plan(b, subscribe="orders", startingoffsets=both) == [
        ("orders", 0, 3, 10),
        ("orders", 1, 0, 10),
    ]
    some = json.dumps({"orders": {"0": 3}})
    with pytest.raises(OptionError, match=r"must name every partition.*lacks orders-1"):
        await _plan(b, subscribe="orders", startingoffsets=some)
    with pytest.raises(OptionError, match="endingOffsets must name every partition"):
        await _plan(b, subscribe="orders", endingoffsets=some)
    other = json.dumps({"orders": {"0": 0, "1": 0}, "refunds": {"0": 0}})
    with pytest.raises(OptionError, match="names refunds-0, which this read does not"):
        await _plan(b, subscribe="orders", startingoffsets=other)
    past = json.dumps({"orders": {"0": 11, "1": 0}})
    with pytest.raises(OptionError, match=r"starts orders-0 at 11, past its log end \(10\)"):
        await _plan(b, subscribe="orders", startingoffsets=past)
    with pytest.raises(OptionError, match=r"ends orders-1 at 12, past its log end \(10\)"):
        await _plan(b, subscribe="orders", endingoffsets=json.dumps({"orders": {"0": 5, "1": 12}}))
    backwards = {"startingoffsets": both, "endingoffsets": json.dumps({"orders": {"0": 2, "1": 4}})}
    with pytest.raises(OptionError, match="orders-0 starts at 3, after its end"):
        await _plan(b, subscribe="orders", **backwards)
    with pytest.raises(OptionError, match=r"topic nothing .* does not exist"):
        await _plan(b, subscribe="orders,nothing")


async def test_records_gone_fail_unless_fail_on_data_loss_is_false(broker: Server) -> None:
    b = _bootstrap(broker)
    await _topics(b, orders=1)
    async with Admin(b) as admin:
        await admin.delete_records({("orders", 0): 4})
    start = json.dumps({"orders": {"0": 1}})
    with pytest.raises(OptionError, match=r"records before 4 are gone.*failOnDataLoss=false"):
        await _plan(b, subscribe="orders", startingoffsets=start)
    lenient = await _plan(b, subscribe="orders", startingoffsets=start, failondataloss="false")
    assert lenient == [("orders", 0, 4, 10)]
    assert await _plan(b, subscribe="orders") == [("orders", 0, 4, 10)]  # earliest is 4 now


async def test_pattern_assign_and_times_choose_partitions(broker: Server) -> None:
    b = _bootstrap(broker)
    before = int(time.time() * 1000) - 1
    await _topics(b, orders=2, orders_eu=1, refunds=1)
    pattern = await _plan(b, subscribepattern="orders.*")
    assert [(t, p) for t, p, _, _ in pattern] == [("orders", 0), ("orders", 1), ("orders_eu", 0)]
    with pytest.raises(OptionError, match="matches no topic"):
        await _plan(b, subscribepattern="order")  # the whole name must match, as in Java
    assigned = await _plan(b, assign=json.dumps({"orders": [1], "refunds": [0]}))
    assert assigned == [("orders", 1, 0, 10), ("refunds", 0, 0, 10)]
    with pytest.raises(OptionError, match="assign names orders-5"):
        await _plan(b, assign=json.dumps({"orders": [5]}))

    future = int(time.time() * 1000) + 60_000
    times = json.dumps({"orders": {"0": before, "1": future}})
    assert await _plan(b, subscribe="orders", startingoffsetsbytimestamp=times) == [
        ("orders", 0, 0, 10)  # partition 1 has nothing at or after `future`: nothing to read
    ]
    with pytest.raises(OptionError, match="startingOffsetsByTimestamp must name every"):
        await _plan(
            b,
            subscribe="orders",
            startingoffsetsbytimestamp=json.dumps({"orders": {"0": before}}),
        )
    # startingTimestamp wins over both, as in Spark.
    both: dict[str, Any] = {"startingoffsetsbytimestamp": times, "startingtimestamp": str(future)}
    assert await _plan(b, subscribe="orders", **both) == []


async def test_backlog_and_where_a_new_group_starts(broker: Server) -> None:
    b = _bootstrap(broker)
    await _topics(b, jobs=2)
    async with Admin(b) as admin:
        assert await backlog(admin, "fresh", ("jobs",)) is None  # no such group yet
        assert await starts_at_log_end(admin, "fresh", ("jobs",))  # latest by default
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "early", {"share.auto.offset.reset": "earliest"}
        )
        assert not await starts_at_log_end(admin, "early", ("jobs",))
        await consume_all(b, "jobs", "early", 20)
        assert await backlog(admin, "early", ("jobs",)) == 0
        async with Producer(b) as producer:
            await producer.send_batch("jobs", 1, [Record(b"x")] * 7)
        assert await backlog(admin, "early", ("jobs",)) == 7
        # Once the group has started the partitions, its position is its own.
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "early", {"share.auto.offset.reset": "latest"}
        )
        assert not await starts_at_log_end(admin, "early", ("jobs",))
    assert "share.auto.offset.reset=earliest" in nothing_read_warning("fresh")


def test_min_records_gate_waits_for_the_backlog_or_the_delay() -> None:
    gate = MinRecordsGate(100, 5_000, now_ms=0)
    assert not gate.ready(99, now_ms=4_999)
    assert gate.ready(100, now_ms=10)
    assert gate.ready(None, now_ms=10)  # unknown backlog: do not hold the stream back
    assert gate.ready(1, now_ms=5_000)  # maxTriggerDelay since the query started
    gate.planned(now_ms=5_000)
    assert not gate.ready(1, now_ms=9_999)
    assert gate.ready(1, now_ms=10_000)
