"""Helpers shared by the admin and CLI tests: a topic, records, and share consumption."""

from __future__ import annotations

import asyncio

from client.admin import Admin
from client.admin import ConfigResourceType
from client.producer import Producer
from client.records import ConsumerRecord
from client.share_consumer import ShareConsumer

# Heartbeats every 200 ms make joins and leaves quick.
FAST_GROUPS: dict[str, object] = {
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 200,
}


async def prepare(bootstrap: str, topic: str, group: str, *, partitions: int = 1) -> None:
    """A topic, and a group that starts at the earliest offset."""
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, group, {"share.auto.offset.reset": "earliest"}
        )


async def produce(bootstrap: str, topic: str, count: int, *, start: int = 0) -> None:
    async with Producer(bootstrap) as producer:
        for i in range(start, start + count):
            await producer.send(topic, b"value-%d" % i, partition=0)


async def poll_until(
    consumer: ShareConsumer, count: int, timeout_s: float = 5.0
) -> list[ConsumerRecord]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    out: list[ConsumerRecord] = []
    while len(out) < count and loop.time() < deadline:
        out.extend(await consumer.poll(0.3))
    return out


async def consume_all(bootstrap: str, topic: str, group: str, count: int) -> list[ConsumerRecord]:
    """Consume `count` records, accept them all, and leave the group."""
    async with ShareConsumer(bootstrap, group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([topic])
        records = await poll_until(consumer, count)
        for r in records:
            consumer.acknowledge(r)
        await consumer.commit_sync()
    return records
