"""Client loops of the small-request and latency phases (Shoal's side), each in its own process.

Queue traffic as web services make it: a Producer with `linger.ms=0` and one record per batch,
share consumers that ACCEPT every record explicitly. The latency phase's records carry their
send time (`time.monotonic_ns()`, one clock for every process on the machine) in the value.

Producers follow the handshake of `bench.workers` ("ready", "go", result); consumers report
`("n", index, delivered, measured, monotonic seconds)` per non-empty poll on a queue until
told to stop, then `("end", index, {...})` with their latencies in ms (doubles, as bytes).
"""

from __future__ import annotations

import logging
import os
import re
import struct
import time
from array import array
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event
from queue import Queue
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer

from bench.security import client_settings

# One record per produce request, sent at once: the "small requests".
SMALL_PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 0,
    "batch.num.messages": 1,
    "compression.type": "none",
    "enable.idempotence": False,
    "queue.buffering.max.messages": 1_000_000,
}

EXPLICIT_SHARE_SETTINGS: dict[str, Any] = {
    "share.acknowledgement.mode": "explicit",
    "log_level": 3,  # hide the per-instance "share consumer is in Preview" warning
}

# A latency record's value starts with its send time and whether it is measured (1) or
# warm-up (0); the rest is padding up to the value size.
STAMP = struct.Struct("<qB")
WARMUP_LIMIT_S = 60.0  # the paced producers stop warming up after this, told or not

Out = Queue[tuple[Any, ...]]


def stamped(value_size: int) -> Callable[[bool], bytes]:
    pad = bytes(max(0, value_size - STAMP.size))
    return lambda measured: STAMP.pack(time.monotonic_ns(), measured) + pad


def latency_ms(value: bytes, received_ns: int) -> float | None:
    """The record's send-to-receive time in ms, or None for a warm-up record."""
    sent, measured = STAMP.unpack_from(value)
    return (received_ns - sent) / 1e6 if measured else None


def paced(
    conn: Connection, rate: int, seconds: float, value_size: int, send: Callable[[bytes], None]
) -> dict[str, Any]:
    """Send `rate` records/s: warm-up records until the driver says "measure", then
    `rate * seconds` measured ones. A send that falls behind schedule goes at once."""
    conn.send("ready")
    conn.recv()
    value = stamped(value_size)
    interval = 1e9 / rate
    measure_from: int | None = None
    target = int(rate * seconds)
    sent = 0
    began = time.monotonic_ns()
    next_at = float(began)
    lag_ns = 0
    while measure_from is None or sent - measure_from < target:
        warming = measure_from is None and sent % 50 == 0
        if warming and (conn.poll() or time.monotonic_ns() - began > WARMUP_LIMIT_S * 1e9):
            measure_from = sent
            start = time.monotonic()
            lag_ns = 0  # a slow start (clients still joining) is not the measured rate
        ahead = next_at - time.monotonic_ns()
        if ahead > 0:
            time.sleep(ahead / 1e9)
        else:
            lag_ns = max(lag_ns, int(-ahead))
        send(value(measure_from is not None))
        sent += 1
        next_at += interval
    end = time.monotonic()
    assert measure_from is not None
    return {
        "start": start,
        "end": end,
        "measured": target,
        "warmup": measure_from,
        "lag_ns": lag_ns,
    }


class LogCounter(logging.Handler):
    """librdkafka's log lines (warnings and worse), counted by text with the numbers
    masked: one request's warning repeated per request would flood the terminal."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()
        self.first: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        kind = re.sub(r"\[\d+\]|\([^)]*\)|\d+", "#", text)
        self.counts[kind] += 1
        self.first.setdefault(kind, text)

    def summary(self) -> list[str]:
        return [f"{n:,}x {self.first[kind][:160]}" for kind, n in self.counts.most_common(3)]


def _producer(bootstrap: str, errors: list[str], logs: LogCounter) -> Producer:
    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    logger = logging.getLogger(f"bench.rdkafka.{os.getpid()}")
    logger.propagate = False
    logger.addHandler(logs)
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            **client_settings(),
            **SMALL_PRODUCER_SETTINGS,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            "logger": logger,
        }
    )


def small_produce_worker(
    conn: Connection, bootstrap: str, topic: str, partitions: int, records: int, value_size: int
) -> None:
    """`records` one-record batches, as fast as librdkafka pipelines them, then flush."""
    errors: list[str] = []
    logs = LogCounter()
    producer = _producer(bootstrap, errors, logs)
    producer.list_topics(topic, timeout=10)
    conn.send("ready")
    conn.recv()
    value = bytes(value_size)
    produce = producer.produce
    start = time.monotonic()
    for i in range(records):
        while True:
            try:
                produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
    left = producer.flush(120)
    end = time.monotonic()
    result = {"start": start, "end": end, "unflushed": left, "errors": errors}
    conn.send(result | {"client_logs": logs.summary()})


def paced_produce_worker(
    conn: Connection,
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: int,
    seconds: float,
    value_size: int,
) -> None:
    errors: list[str] = []
    logs = LogCounter()
    producer = _producer(bootstrap, errors, logs)
    producer.list_topics(topic, timeout=10)
    i = 0

    def send(value: bytes) -> None:
        nonlocal i
        producer.produce(topic, value, partition=i % partitions)
        producer.poll(0)
        i += 1

    result = paced(conn, rate, seconds, value_size, send)
    result["unflushed"] = producer.flush(60)
    result["errors"] = errors
    result["client_logs"] = logs.summary()
    conn.send(result)


def explicit_share_worker(
    index: int,
    bootstrap: str,
    group: str,
    topic: str,
    barrier: Barrier,
    done: Event,
    out: Out,
    latency: bool,
) -> None:
    """A share consumer that ACCEPTs each record it gets (sent with its next poll), until
    told to stop; then commit_sync sends the last acknowledgements."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            **client_settings(),
            **EXPLICIT_SHARE_SETTINGS,
        }
    )
    barrier.wait()
    consumer.subscribe([topic])
    latencies = array("d")
    errors: list[str] = []
    acknowledge = consumer.acknowledge
    while not done.is_set():
        messages = consumer.poll(0.1)
        received = time.monotonic_ns()
        delivered = 0
        for m in messages:
            if m.error() is not None:
                if len(errors) < 10:
                    errors.append(str(m.error()))
                continue
            acknowledge(m)
            delivered += 1
            if latency:
                ms = latency_ms(m.value() or b"", received)
                if ms is not None:
                    latencies.append(ms)
        if delivered:
            out.put(("n", index, delivered, len(latencies), received / 1e9))
    commit_errors = sum(1 for r in (consumer.commit_sync(30) or {}).values() if r is not None)
    out.put(
        (
            "end",
            index,
            {
                "acked": time.monotonic(),
                "latencies": latencies.tobytes(),
                "errors": errors,
                "commit_errors": commit_errors,
            },
        )
    )
    consumer.close()
