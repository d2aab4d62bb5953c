"""Transactional produce: what exactly-once costs a producer, against an idempotent one.

Two rows from the same broker, same settings as the produce phase: an idempotent Producer
(`enable.idempotence=true`, the base every transactional producer runs on), then a
transactional one (`transactional.id`) that commits every `TXN_RECORDS` records (begin,
produce, commit_transaction, which flushes: each commit is an AddPartitionsToTxn, the batches,
an EndTxn and a marker per partition). The ratio of the two is the transactions' own cost.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka import Producer

from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from bench.security import client_settings
from bench.workers import PRODUCER_SETTINGS

TXN_RECORDS = 10_000  # records per transaction


def _producer(bootstrap: str, errors: list[str], **extra: Any) -> Producer:
    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            **client_settings(),
            **PRODUCER_SETTINGS,
            "enable.idempotence": True,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            **extra,
        }
    )


def _send(producer: Producer, topic: str, value: bytes, first: int, count: int, parts: int) -> int:
    """Produce `count` records (waiting when the queue is full); how often it was full."""
    full = 0
    produce = producer.produce
    for i in range(first, first + count):
        while True:
            try:
                produce(topic, value, partition=i % parts)
                break
            except BufferError:
                full += 1
                producer.poll(0.005)
    return full


def produce_worker(
    conn: Connection, bootstrap: str, topic: str, records: int, partitions: int, value_size: int,
    per_txn: int,
) -> None:  # fmt: skip
    """Idempotent (`per_txn` 0) or transactional, committing every `per_txn` records."""
    errors: list[str] = []
    extra = {"transactional.id": f"bench-txn-{os.getpid()}"} if per_txn else {}
    producer = _producer(bootstrap, errors, **extra)
    producer.list_topics(topic, timeout=10)
    if per_txn:
        producer.init_transactions(30)
    conn.send("ready")
    conn.recv()
    value = os.urandom(value_size)
    full, commits = 0, 0
    start = time.monotonic()
    if per_txn:
        for first in range(0, records, per_txn):
            producer.begin_transaction()
            full += _send(producer, topic, value, first, min(per_txn, records - first), partitions)
            producer.commit_transaction(120)
            commits += 1
        left = 0
    else:
        full = _send(producer, topic, value, 0, records, partitions)
        left = producer.flush(120)
    end = time.monotonic()
    conn.send({"start": start, "end": end, "unflushed": left, "errors": errors,
               "queue_full": full, "commits": commits})  # fmt: skip


def _run(b: Bench, per_txn: int) -> Row:
    kind = "txn" if per_txn else "idempotent"
    topic = f"bench-{kind}-{len(b.topics)}"
    b.create_topic(topic)
    result, cpu = b.run_worker(
        produce_worker, b.broker.bootstrap, topic, b.records, b.partitions, b.value_size, per_txn
    )
    if result["unflushed"] or result["errors"]:
        raise RuntimeError(f"{kind} produce to {topic} failed: {result}")
    b.topics[topic] = b.records
    label = f"produce acks=all, {b.partitions} partitions, " + (
        f"transactional, commit every {per_txn:,}" if per_txn else "idempotent"
    )
    return Row(
        key=f"produce-{kind}", label=label, records=b.records,
        seconds=result["end"] - result["start"], broker_cpu_s=cpu, value_bytes=b.value_size,
        note=f"{result['commits']} commits" if per_txn else "",
    )  # fmt: skip


@phase("txn", f"an idempotent Producer, then a transactional one committing every {TXN_RECORDS:,}")
def txn_phase(b: Bench) -> list[Row]:
    return [_run(b, 0), _run(b, TXN_RECORDS)]
