"""Acquisition modes through confluent-kafka's ShareConsumer: share.acquire.mode=record_limit
(KIP-1206) paces consumers by max.poll.records even when producer batches are much larger.

One `shoal serve` process for the module; every test uses its own topic and group.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import error_code
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import wait_for_share_members

pytestmark = pytest.mark.compat

_names = itertools.count()

BATCH = 1_000  # records per producer batch
MAX_POLL = 50  # max.poll.records of every consumer


BROKER_CONFIG = SHORT_SESSION_CONFIG  # the `broker` of tests/compat/conftest.py


def fresh(broker: BrokerProcess, **group_configs: str) -> tuple[str, str]:
    n = next(_names)
    topic, group = f"modes-t{n}", f"modes-g{n}"
    create_topic(broker.bootstrap, topic, 1)
    set_group_configs(
        broker.bootstrap, group, {"share.auto.offset.reset": "earliest", **group_configs}
    )
    return topic, group


def produce_batches(bootstrap: str, topic: str, batches: int) -> None:
    """`batches` producer batches of BATCH records each: a flush per batch, and a linger long
    enough that nothing leaves before it."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5_000,
            "batch.num.messages": BATCH,
            "batch.size": 4 * 1024 * 1024,
            **QUIET,
        }
    )
    errors: list[KafkaError] = []
    for b in range(batches):
        for i in range(b * BATCH, (b + 1) * BATCH):
            p.produce(topic, key=b"k%06d" % i, on_delivery=lambda e, _m: e and errors.append(e))
        assert p.flush(20) == 0
    assert not errors, errors[:3]


def test_acquire_mode_is_a_bounded_group_config(broker: BrokerProcess) -> None:
    _, group = fresh(broker)
    assert describe_group_configs(broker.bootstrap, group)["share.acquire.mode"] == (
        "batch_optimized"
    )
    set_group_configs(broker.bootstrap, group, {"share.acquire.mode": "record_limit"})
    assert describe_group_configs(broker.bootstrap, group)["share.acquire.mode"] == "record_limit"
    with pytest.raises(KafkaException) as exc:
        set_group_configs(broker.bootstrap, group, {"share.acquire.mode": "fastest"})
    assert error_code(exc.value) == KafkaError.INVALID_CONFIG
    assert describe_group_configs(broker.bootstrap, group)["share.acquire.mode"] == "record_limit"


def test_record_limit_paces_four_consumers_over_large_batches(broker: BrokerProcess) -> None:
    """Two producer batches of 1,000 and four consumers polling 50 at a time: every poll
    holds at most 50 records and each consumer gets its share (batch_optimized would hand
    each whole batch to one consumer and leave two with nothing)."""
    topic, group = fresh(broker, **{"share.acquire.mode": "record_limit"})
    total = 2 * BATCH
    consumers = [
        share_consumer(broker.bootstrap, group, **{"max.poll.records": MAX_POLL}) for _ in range(4)
    ]
    for c in consumers:
        c.subscribe([topic])
    delivered: Counter[int] = Counter()
    per_member: Counter[int] = Counter()
    largest_poll = 0
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(index: int, c: ShareConsumer) -> None:
        nonlocal largest_poll
        try:
            while not stop.is_set():
                records = poll_records(c, 0.2)
                with lock:
                    largest_poll = max(largest_poll, len(records))
                    per_member[index] += len(records)
                    delivered.update(m.offset() for m in records)
                if records:
                    time.sleep(0.1)  # the work: 50 records take 100 ms
        except BaseException as e:  # surfaced in the test thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    try:
        wait_for_share_members(broker.bootstrap, group, len(consumers))  # before records exist
        produce_batches(broker.bootstrap, topic, 2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(delivered) < total and not errors:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()
    assert not errors, errors
    assert len(delivered) == total, f"{len(delivered)} of {total} records delivered"
    assert largest_poll <= MAX_POLL, f"a poll returned {largest_poll} records"
    # Evenly: every consumer within half of its fair share either way.
    fair = total / len(consumers)
    shares = [per_member[i] for i in range(len(consumers))]
    assert all(0.5 * fair <= s <= 1.5 * fair for s in shares), shares
