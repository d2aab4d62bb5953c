"""Fetch and ShareFetch answers sized as Kafka sizes them, through confluent-kafka's real
clients (librdkafka 2.16) and a broker process (issue 29, items 1 and 6).

librdkafka refuses a whole answer larger than `receive.message.max.bytes` (at least
`fetch.max.bytes` + 512): "Invalid response size N (0..M)", and the consumer never gets past
it. Kafka keeps an answer within MaxBytes except for one whole batch, the first data of the
answer (KIP-74; `ReplicaManager.readFromLog`: `minOneMessage` only until a partition returned
bytes, `limitBytes` shrinking as partitions are read). A ShareFetch shares MaxBytes among its
partitions (`PartitionMaxBytesStrategy` UNIFORM in `DelayedShareFetch`, KAFKA-18404) and is
read the same way (not hard-limited, KAFKA-18936).

A segment that compaction emptied holds only an empty batch here (Kafka's cleaner leaves
nothing, and `LocalLog.read` goes on to the next segment). librdkafka answered only empty
batches doubles its fetch size, then reports "Message at offset ... might be too large to
fetch" for every such answer; the read now goes on past them to the data that follows.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from protocol.record_batch import iter_batch_headers
from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = pytest.mark.compat

PARTITIONS = 3
BIG = 900_000  # one record, one batch: two of them do not fit a 1 MB answer
# A 1 MB fetch.max.bytes, and the smallest receive buffer librdkafka accepts with it.
ONE_MB_FETCHES = {"fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_000_512}
_names = itertools.count()


# The `broker` of tests/compat/conftest.py.
BROKER_CONFIG = {"log.cleaner.backoff.ms": 200, "log.flush.interval.ms": 1000}


def _produce_big(bootstrap: str, topic: str, per_partition: int) -> set[bytes]:
    """`per_partition` records of BIG random bytes in each partition, one batch each."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **QUIET})
    sent: set[bytes] = set()
    errors: list[KafkaError] = []
    for partition, _ in itertools.product(range(PARTITIONS), range(per_partition)):
        value = os.urandom(BIG)
        sent.add(value[:16])
        p.produce(
            topic, value, partition=partition, on_delivery=lambda e, _m: e and errors.append(e)
        )
        p.flush(10)
    assert not errors
    return sent


def test_a_consumer_with_a_1_mb_fetch_max_gets_every_big_batch(broker: BrokerProcess) -> None:
    topic = f"big-{next(_names)}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    sent = _produce_big(broker.bootstrap, topic, 2)
    problems: list[str] = []
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"big-reader-{topic}",
            "error_cb": lambda e: problems.append(str(e)),
            **ONE_MB_FETCHES,
            **QUIET,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 30
    try:
        while got != sent and time.monotonic() < deadline and not problems:
            for m in c.consume(10, timeout=0.5):
                if m.error() is not None:
                    problems.append(str(m.error()))
                else:
                    got.add(m.value()[:16])
    finally:
        c.close()
    assert not problems
    assert got == sent


def test_a_share_consumer_with_a_1_mb_fetch_max_gets_every_big_batch(
    broker: BrokerProcess,
) -> None:
    topic, group = f"share-big-{next(_names)}", f"share-big-g{next(_names)}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    sent = _produce_big(broker.bootstrap, topic, 2)
    problems: list[str] = []
    c = share_consumer(
        broker.bootstrap, group, error_cb=lambda e: problems.append(str(e)), **ONE_MB_FETCHES
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(sent) and time.monotonic() < deadline and not problems:
            for m in c.poll(0.5):
                if m.error() is not None:
                    problems.append(str(m.error()))
                else:
                    got.append(m.value()[:16])
    finally:
        c.close()
    assert not problems
    assert sorted(got) == sorted(sent)


# Compacted: segments of 4 KiB, cleaned as soon as they are sealed.
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
}
ROUNDS = 40  # batches of one key's old values, one segment each: all emptied by the cleaner


def _emptied_segments(data: Path, topic: str) -> int:
    """Segment files holding nothing but one empty batch (what cleaning left of them)."""
    count = 0
    for path in (data / f"{topic}-0").glob("*.log"):
        headers = [h for _, h in iter_batch_headers(path.read_bytes())]
        count += len(headers) == 1 and headers[0].record_count == 0
    return count


def _fetch_requests(stats: list[dict[str, Any]]) -> int:
    """Fetch requests the consumer sent to the broker, from its last statistics."""
    brokers = stats[-1]["brokers"].values()
    return sum(b["req"].get("Fetch", 0) for b in brokers if b["nodeid"] >= 0)


def test_a_compacted_topic_with_emptied_segments_is_read_without_errors_in_few_fetches(
    broker: BrokerProcess,
) -> None:
    topic = f"emptied-{next(_names)}"
    client = admin(broker.bootstrap)
    for f in client.create_topics([NewTopic(topic, 1, 1, config=COMPACTED)]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, **QUIET})
    for r in range(ROUNDS):  # ~5 KB a round, one batch: every round rolls a new segment
        for i in range(30):
            p.produce(topic, key=b"k", value=b"%04d-%02d-" % (r, i) + b"x" * 150)
        assert p.flush(10) == 0
    p.produce(topic, key=b"tail", value=b"tail")  # seals the segment with k's latest value
    assert p.flush(10) == 0
    deadline = time.monotonic() + 30
    while _emptied_segments(broker.data_dir, topic) < ROUNDS - 2:
        assert time.monotonic() < deadline, "the cleaner did not empty the old segments"
        time.sleep(0.2)

    stats: list[dict[str, Any]] = []
    problems: list[str] = []
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{topic}",
            "fetch.max.bytes": 1 << 20,
            "statistics.interval.ms": 100,
            "stats_cb": lambda s: stats.append(json.loads(s)),
            "error_cb": lambda e: problems.append(str(e)),
            **QUIET,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got: dict[bytes, bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while b"tail" not in got and time.monotonic() < deadline:
            for m in c.consume(100, timeout=0.5):
                if m.error() is not None:
                    problems.append(str(m.error()))
                else:
                    got[m.key()] = m.value()
        seen = len(stats)
        while len(stats) == seen and time.monotonic() < deadline:
            c.poll(0.1)  # one more statistics event, counting every fetch made
    finally:
        c.close()
    assert not problems
    assert got[b"k"].startswith(b"%04d-29-" % (ROUNDS - 1)) and got[b"tail"] == b"tail"
    assert _fetch_requests(stats) <= 5


def test_one_share_fetch_serves_every_partition_with_records(broker: BrokerProcess) -> None:
    """librdkafka's 0179-share_consumer_destroy (`test_broker_decommission_with_commit_sync`):
    50 records in each of 2 partitions, max.poll.records 500, implicit acknowledgement; it
    expects each poll to hold one partition's records, and commit_sync to name one partition.
    That holds in its mock cluster, where each partition has its own leader broker and so its
    own ShareFetch. One broker leading both answers as Kafka's does: `DelayedShareFetch` reads
    every partition it can acquire in the request and `ShareFetchUtils.processFetchResponse`
    acquires from each within MaxRecords, so one answer holds both (see FINDINGS.md)."""
    topic, group = f"two-{next(_names)}", f"two-g{next(_names)}"
    create_topic(broker.bootstrap, topic, 2)
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **QUIET})
    for partition in range(2):
        for i in range(50):
            p.produce(topic, b"%d-%d" % (partition, i), partition=partition)
    assert p.flush(10) == 0
    c = share_consumer(broker.bootstrap, group, **{"max.poll.records": 500})
    c.subscribe([topic])
    polls: list[list[tuple[int, int, int]]] = []
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, polls)) < 100 and time.monotonic() < deadline:
            got = [(m.partition(), m.offset(), m.delivery_count()) for m in c.poll(0.5)]
            if got:
                polls.append(got)
        last = {partition for partition, _, _ in polls[-1]}
        results = c.commit_sync(10)
    finally:
        c.close()
    delivered = sorted(r for poll in polls for r in poll)
    assert delivered == [(p, o, 1) for p in range(2) for o in range(50)]
    assert {partition for partition, _, _ in polls[0]} == {0, 1}
    assert {tp.partition for tp in results} == last
    assert all(error is None for error in results.values())
