"""Streaming queries over the `shoal` source, as the Spark tests build and check them."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from client import Admin
from client import ConsumerRecord
from client import ShareConsumer
from spark.group_state import backlog
from tests.brokers import BrokerProcess


def stream(spark: Any, broker: BrokerProcess, topic: str, group: str, **options: Any) -> Any:
    reader = (
        spark.readStream.format("shoal")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("group", group)
        .option("pollTimeoutMs", "500")
    )
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


class Collector:
    """A foreachBatch sink in this process: the rows of every batch, by batch id."""

    def __init__(self, before: Any = None) -> None:
        self.batches: dict[int, list[Any]] = {}
        self.lock = threading.Lock()
        self.before = before

    def __call__(self, df: Any, batch_id: int) -> None:
        if self.before is not None:
            self.before(df, batch_id)
        rows = df.select("topic", "partition", "offset", "value", "deliveryCount").collect()
        with self.lock:
            self.batches[batch_id] = rows  # a replayed batch replaces its first attempt

    @property
    def rows(self) -> list[Any]:
        with self.lock:
            return [r for rows in self.batches.values() for r in rows]

    def offsets(self) -> list[tuple[str, int, int]]:
        return [(r.topic, r.partition, r.offset) for r in self.rows]


def run_available_now(df: Any, sink: Collector, checkpoint: Path, timeout: float = 120) -> None:
    q = df.writeStream.foreachBatch(sink).trigger(availableNow=True)
    q = q.option("checkpointLocation", str(checkpoint)).start()
    assert q.awaitTermination(timeout), "the AvailableNow run did not end"
    assert q.exception() is None


async def poll_for(bootstrap: str, group: str, topic: str, seconds: float) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    async with ShareConsumer(bootstrap, group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got.extend(await consumer.poll(0.3))
        # explicit mode, nothing acknowledged: close() releases whatever came
    return got


def unacknowledged(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's records of `topic` not yet accepted or archived (acquired, released or never
    delivered), as DescribeShareGroupOffsets counts them: 0 means nothing is left, without
    waiting for a poll to come back empty. None while the group has not started a partition."""

    async def ask() -> int | None:
        async with Admin(bootstrap) as admin:
            return await backlog(admin, group, (topic,))

    return asyncio.run(ask())
