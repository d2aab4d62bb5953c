"""Client loops, each run in its own process (multiprocessing, spawn) so that the driver, the
broker and the clients do not share an interpreter.

Every worker follows the same handshake over a `Connection`: build the client and warm up
(metadata), send "ready", wait for "go", run the measured loop, send a result dict.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event
from queue import Queue
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition

from bench.security import client_settings

# librdkafka settings for the produce phase; printed with the results.
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 10_000,
    "compression.type": "none",
    "enable.idempotence": False,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "message.max.bytes": 1_000_000,
}

CONSUMER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "fetch.wait.max.ms": 100,
    "fetch.min.bytes": 1,
    "max.partition.fetch.bytes": 4 * 1024 * 1024,
    "fetch.max.bytes": 50 * 1024 * 1024,
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 10,
}

SHARE_SETTINGS: dict[str, Any] = {
    "share.acknowledgement.mode": "implicit",
    "log_level": 3,  # hide the per-instance "share consumer is in Preview" warning
}


def produce_untimed(
    producer: Producer,
    topic: str,
    records: int,
    value: bytes,
    partitions: int,
    key: Callable[[int], bytes | None] = lambda i: None,
) -> None:
    """Fill a topic before a phase (not timed): `records` records spread over `partitions`,
    waiting for librdkafka's queue when it is full, then flushed.

    :raises RuntimeError: the flush did not finish.
    """
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=key(i), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
    if producer.flush(120):
        raise RuntimeError(f"producing to {topic} did not finish")


def produce_worker(
    conn: Connection, bootstrap: str, topic: str, records: int, partitions: int, value_size: int
) -> None:
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            **client_settings(),
            **PRODUCER_SETTINGS,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(topic, timeout=10)
    conn.send("ready")
    conn.recv()
    value = os.urandom(value_size)
    produce = producer.produce
    full = 0
    start = time.monotonic()
    for i in range(records):
        while True:
            try:
                produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                full += 1
                producer.poll(0.005)
    left = producer.flush(120)
    end = time.monotonic()
    conn.send({"start": start, "end": end, "unflushed": left, "errors": errors, "queue_full": full})


def fetch_worker(
    conn: Connection, bootstrap: str, topic: str, records: int, partitions: int
) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-fetch-{os.getpid()}"}
        | client_settings()
        | CONSUMER_SETTINGS
    )
    consumer.list_topics(topic, timeout=10)
    conn.send("ready")
    conn.recv()
    start = time.monotonic()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count = 0
    errors: list[str] = []
    deadline = start + 300
    while count < records and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=10_000, timeout=1.0):
            err = msg.error()
            if err is None:
                count += 1
            elif err.code() != KafkaError._PARTITION_EOF and len(errors) < 10:
                errors.append(str(err))
    end = time.monotonic()
    consumer.close()
    conn.send({"start": start, "end": end, "count": count, "errors": errors})


def share_worker(
    index: int,
    bootstrap: str,
    group: str,
    topic: str,
    barrier: Barrier,
    done: Event,
    out: Queue[tuple[Any, ...]],
    poll_timeout: float,
) -> None:
    """One share consumer in implicit mode: report every poll's offsets until told to stop,
    then accept the last poll's records with commit_sync and report when that returned."""
    consumer = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **client_settings(), **SHARE_SETTINGS}
    )
    acks = {"ok": 0, "failed": 0}

    def on_ack(offsets: dict[Any, set[int]], exc: Exception | None) -> None:
        acks["failed" if exc is not None else "ok"] += sum(len(o) for o in offsets.values())

    consumer.set_acknowledgement_commit_callback(on_ack)
    barrier.wait()
    start = time.monotonic()
    consumer.subscribe([topic])
    polls = nonempty = delivered = 0
    errors: list[str] = []
    while not done.is_set():
        messages = consumer.poll(poll_timeout)
        now = time.monotonic()
        polls += 1
        if not messages:
            continue
        nonempty += 1
        ranges: list[list[int]] = []  # [partition, first, last], consecutive offsets merged
        for m in messages:
            if m.error() is not None:
                if len(errors) < 10:
                    errors.append(str(m.error()))
                continue
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None  # a record, not an error
            last = ranges[-1] if ranges else None
            if last is not None and last[0] == partition and last[2] + 1 == offset:
                last[2] = offset
            else:
                ranges.append([partition, offset, offset])
            delivered += 1
        out.put(("poll", index, now, ranges))
    commit_errors = 0
    for result in (consumer.commit_sync(30) or {}).values():
        if result is not None:
            commit_errors += 1
    acked = time.monotonic()
    consumer.close()  # serves any acknowledgement callbacks still queued
    out.put(
        (
            "end",
            index,
            {
                "start": start,
                "acked": acked,
                "polls": polls,
                "nonempty_polls": nonempty,
                "delivered": delivered,
                "errors": errors,
                "commit_errors": commit_errors,
                "acked_ok": acks["ok"],
                "ack_failed": acks["failed"],
            },
        )
    )
