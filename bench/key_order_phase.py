"""Key-ordered sharing (share.key.ordering.enable): its throughput cost.

One partition of records with 1,000 keys, read by 8 ShareConsumers in their own processes:
once by a group with key ordering (a record of a key is acquired only when no earlier one of
its key is in flight, and keys are read from the batches), once by a plain group, same topic.
"""

from __future__ import annotations

from dataclasses import replace

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from bench.phases import Bench
from bench.phases import Row
from bench.phases import _share_run
from bench.phases import phase
from bench.workers import produce_untimed

KEYS, CONSUMERS, TOPIC = 1_000, 8, "bench-keyed"


def _produce_keyed(b: Bench, records: int) -> None:
    """`records` records on one partition, keys key-0000..key-0999 in turn (not timed)."""
    futures = b.admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": b.broker.bootstrap, "linger.ms": 20})
    value = b"x" * b.value_size
    produce_untimed(producer, TOPIC, records, value, 1, key=lambda i: b"key-%04d" % (i % KEYS))
    b.topics[TOPIC] = records


@phase("key-order", "8 ShareConsumers on 1 partition of 1,000 keys: key-ordered vs plain")
def key_order_phase(b: Bench) -> list[Row]:
    if TOPIC not in b.topics:  # made once; every run uses new groups
        _produce_keyed(b, b.share_records)
    ordered = _share_run(b, TOPIC, CONSUMERS, group_configs={"share.key.ordering.enable": "true"})
    plain = _share_run(b, TOPIC, CONSUMERS)
    return [
        replace(
            ordered,
            key="share-keyed-8",
            label=f"share, {CONSUMERS} consumers, 1 partition, {KEYS:,} keys, key-ordered",
        ),
        replace(
            plain,
            key="share-unkeyed-8",
            label=f"share, {CONSUMERS} consumers, 1 partition, {KEYS:,} keys, unordered",
        ),
    ]
