"""KIP-932 share groups through confluent-kafka's ShareConsumer (librdkafka 2.16).

One `shoal serve` process for the module, with short share-session timeouts so a vanished
member is noticed within seconds. Every test uses its own topic and group.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer

from client import Admin
from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import error_code
from tests.compat.support import poll_records
from tests.compat.support import poll_until
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import wait_for_share_acknowledged
from tests.compat.support import wait_for_share_members

pytestmark = pytest.mark.compat

_names = itertools.count()


BROKER_CONFIG = SHORT_SESSION_CONFIG  # the `broker` of tests/compat/conftest.py


def fresh(broker: BrokerProcess, partitions: int, **group_configs: str) -> tuple[str, str]:
    """A new topic and a new group reading it from the earliest offset."""
    n = next(_names)
    topic, group = f"share-t{n}", f"share-g{n}"
    create_topic(broker.bootstrap, topic, partitions)
    set_group_configs(
        broker.bootstrap, group, {"share.auto.offset.reset": "earliest", **group_configs}
    )
    return topic, group


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> set[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    errors: list[KafkaError] = []
    keys = set()
    for i in range(start, start + count):
        key = b"k%06d" % i
        keys.add(key)
        p.produce(
            topic, key=key, value=b"v%06d" % i, on_delivery=lambda e, _m: e and errors.append(e)
        )
    assert p.flush(20) == 0
    assert not errors, errors[:3]
    return keys


def ident(m: Message) -> tuple[int, int]:
    return (m.partition(), m.offset())


def test_three_implicit_consumers_get_every_record_exactly_once(broker: BrokerProcess) -> None:
    topic, group = fresh(broker, 3)
    total = 3000
    counts: Counter[tuple[int, int]] = Counter()
    per_member: Counter[int] = Counter()
    keys_seen: set[bytes] = set()
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []
    consumers = [share_consumer(broker.bootstrap, group) for _ in range(3)]
    for c in consumers:
        c.subscribe([topic])

    def run(index: int, c: ShareConsumer) -> None:
        try:
            while not stop.is_set():
                records = poll_records(c, 0.2)
                with lock:
                    for m in records:
                        counts[ident(m)] += 1
                        per_member[index] += 1
                        keys_seen.add(m.key())
        except BaseException as e:  # surfaced in the test thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    try:
        wait_for_share_members(broker.bootstrap, group, 3)  # before records exist
        sent = produce(broker.bootstrap, topic, total)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(counts) < total and not errors:
            time.sleep(0.1)
        # Keep polling until every record is acknowledged: none can come a second time after.
        wait_for_share_acknowledged(broker.bootstrap, group, total)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in consumers:
            c.close()
    assert not errors, errors
    assert len(counts) == total, f"{len(counts)} of {total} records delivered"
    dupes = {k: v for k, v in counts.items() if v > 1}
    assert not dupes, f"{len(dupes)} records delivered more than once, e.g. {list(dupes)[:5]}"
    assert keys_seen == sent
    assert len(per_member) >= 2, f"one member got everything: {per_member}"


def _explicit_run(
    c: ShareConsumer, decide: dict[bytes, AcknowledgeType], seconds: float
) -> list[tuple[bytes, int | None]]:
    """Poll for `seconds`, acknowledging each record as `decide` says; what was delivered."""
    seen: list[tuple[bytes, int | None]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in poll_records(c, 0.2):
            seen.append((m.key(), m.delivery_count()))
            c.acknowledge(m, decide.get(m.key(), AcknowledgeType.ACCEPT))
    c.commit_sync(10)
    return seen


def test_explicit_accept_release_reject(broker: BrokerProcess) -> None:
    topic, group = fresh(broker, 1)
    produce(broker.bootstrap, topic, 3)
    accept, release, reject = b"k000000", b"k000001", b"k000002"
    c = share_consumer(broker.bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    try:
        # First delivery: accept one, release one, reject one.
        first: list[Message] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(first) < 3:
            for m in poll_records(c, 0.2):
                first.append(m)
                c.acknowledge(
                    m,
                    {
                        accept: AcknowledgeType.ACCEPT,
                        release: AcknowledgeType.RELEASE,
                        reject: AcknowledgeType.REJECT,
                    }[m.key()],
                )
        assert sorted((m.key(), m.delivery_count()) for m in first) == [
            (accept, 1),
            (release, 1),
            (reject, 1),
        ]
        # Only the released record comes back, with delivery count 2; accept it this time.
        seen = _explicit_run(c, {}, 4.0)
        assert seen == [(release, 2)]
    finally:
        c.close()


def test_five_thousand_records_acknowledged_alternately_commit_without_error(
    broker: BrokerProcess,
) -> None:
    """librdkafka's acknowledgement test (issue 27): a ShareConsumer in explicit mode with
    max.poll.records 5000 polls 5,000 records, acknowledges them one by one, alternately
    ACCEPT and REJECT, and commits: one ShareAcknowledge of 5,000 single-record ranges, as
    many as it holds. The records are one producer batch, handed out whole (batch_optimized:
    the batch holding the MaxRecords-th record, core/src/main/java/kafka/server/share/
    SharePartition.java acquireNewBatchRecords), so the window holds more records than
    share.partition.max.record.locks (2,000). Every partition commits without error, the
    share-partition starts past all 5,000 (ACCEPTed done, REJECTed archived), and another
    member gets none of them, even once their 2 s locks would have run out."""
    total = 5000
    topic, group = fresh(broker, 1, **{"share.record.lock.duration.ms": "2000"})
    # One batch of exactly `total`: librdkafka sends a batch once it holds batch.num.messages,
    # and the linger is longer than any loaded machine takes to queue them (a 2 s linger once
    # split them in two under CI's load, and the poll held only the first).
    settings = {"linger.ms": 60_000, "batch.num.messages": total}
    p = Producer({"bootstrap.servers": broker.bootstrap, **settings, **QUIET})
    for i in range(total):
        p.produce(topic, key=b"k%06d" % i, value=b"v%06d" % i)
    assert p.flush(20) == 0
    settings = {"share.acknowledgement.mode": "explicit", "max.poll.records": total}
    c = share_consumer(broker.bootstrap, group, **settings)
    c.subscribe([topic])
    try:
        records: list[Message] = []
        deadline = time.monotonic() + 20
        while not records and time.monotonic() < deadline:
            records = poll_records(c, 0.5)
        assert [m.offset() for m in records] == list(range(total))  # one poll holds them all
        for i, m in enumerate(records):
            c.acknowledge(m, AcknowledgeType.ACCEPT if i % 2 == 0 else AcknowledgeType.REJECT)
        committed = c.commit_sync(10)
    finally:
        c.close()
    failed = {str(tp): err for tp, err in committed.items() if err is not None or tp.error}
    assert committed and not failed, failed
    offsets = asyncio.run(_share_offsets(broker.bootstrap, group))
    assert offsets[(topic, 0)].start_offset == total
    other = share_consumer(broker.bootstrap, group)
    other.subscribe([topic])
    try:
        again: list[Message] = []
        poll_until([other], lambda: False, lambda _c, r: again.extend(r), 4.0)
    finally:
        other.close()
    assert again == [], [(m.offset(), m.delivery_count()) for m in again[:5]]


async def _share_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], Any]:
    async with Admin(bootstrap) as admin:
        return await admin.describe_share_group_offsets(group)


def test_delivery_count_limit_from_group_config(broker: BrokerProcess) -> None:
    topic, group = fresh(broker, 1, **{"share.delivery.count.limit": "3"})
    assert describe_group_configs(broker.bootstrap, group)["share.delivery.count.limit"] == "3"
    produce(broker.bootstrap, topic, 1)
    c = share_consumer(broker.bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    try:
        seen = _explicit_run(c, {b"k000000": AcknowledgeType.RELEASE}, 6.0)
    finally:
        c.close()
    assert seen == [(b"k000000", 1), (b"k000000", 2), (b"k000000", 3)]


def test_invalid_group_config_is_refused(broker: BrokerProcess) -> None:
    _, group = fresh(broker, 1)
    for name, value in [
        ("share.delivery.count.limit", "100"),  # above group.share.max.delivery.count.limit
        ("share.record.lock.duration.ms", "10"),  # below the broker's minimum
        ("share.auto.offset.reset", "sometimes"),
        ("share.no.such.config", "1"),
    ]:
        with pytest.raises(KafkaException) as exc:
            set_group_configs(broker.bootstrap, group, {name: value})
        assert error_code(exc.value) == KafkaError.INVALID_CONFIG, (name, exc.value)
    configs = describe_group_configs(broker.bootstrap, group)
    assert configs["share.auto.offset.reset"] == "earliest"
    assert configs["share.delivery.count.limit"] != "100"


def test_lock_expiry_from_group_config_redelivers_to_another_member(
    broker: BrokerProcess,
) -> None:
    topic, group = fresh(broker, 1, **{"share.record.lock.duration.ms": "2000"})
    assert describe_group_configs(broker.bootstrap, group)["share.record.lock.duration.ms"] == (
        "2000"
    )
    sent = produce(broker.bootstrap, topic, 5)
    holder = share_consumer(broker.bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    other = share_consumer(broker.bootstrap, group)
    try:
        holder.subscribe([topic])
        held: list[Message] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not held:
            held = poll_records(holder, 0.2)
        assert {m.key() for m in held} == sent
        acquired_at = time.monotonic()
        # The holder never acknowledges and never polls again; the other member gets the
        # records once their 2 s locks expire.
        other.subscribe([topic])
        got: list[Message] = []
        poll_until([other], lambda: len(got) >= len(sent), lambda _c, r: got.extend(r), 15)
        waited = time.monotonic() - acquired_at
    finally:
        other.close()
        holder.close()
    assert {m.key() for m in got} == sent
    assert {m.delivery_count() for m in got} == {2}
    assert 1.5 <= waited < 12, waited


def test_two_groups_each_get_every_record(broker: BrokerProcess) -> None:
    topic, group_a = fresh(broker, 3)
    group_b = group_a + "-b"
    set_group_configs(broker.bootstrap, group_b, {"share.auto.offset.reset": "earliest"})
    sent = produce(broker.bootstrap, topic, 600)
    got: dict[str, Counter[bytes]] = {group_a: Counter(), group_b: Counter()}
    consumers = {g: share_consumer(broker.bootstrap, g) for g in got}
    by_consumer = {id(c): g for g, c in consumers.items()}
    try:
        for c in consumers.values():
            c.subscribe([topic])
        poll_until(
            consumers.values(),
            lambda: all(len(v) >= len(sent) for v in got.values()),
            lambda c, recs: got[by_consumer[id(c)]].update(m.key() for m in recs),
            30,
        )
    finally:
        for c in consumers.values():
            c.close()
    for g, counts in got.items():
        assert set(counts) == sent, (g, len(counts))
        assert max(counts.values()) == 1, g


CHILD = r"""
import json, sys, time
from confluent_kafka import ShareConsumer
bootstrap, group, topic = sys.argv[1:4]
c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([topic])
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    msgs = [m for m in c.poll(0.2) if m.error() is None]
    if msgs:
        print(json.dumps([m.key().decode() for m in msgs]), flush=True)
        break
while True:  # hold the records: never acknowledge, never poll again, keep heartbeating
    time.sleep(1)
"""


def test_records_of_a_killed_member_go_to_another(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = fresh(broker, 1)
    sent = produce(broker.bootstrap, topic, 20)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    survivor = share_consumer(broker.bootstrap, group)
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 25)
        assert ready, "the child consumer got no records"
        held = {k.encode() for k in json.loads(child.stdout.readline())}
        assert held == sent
        # While the child lives and holds the locks, another member gets nothing.
        survivor.subscribe([topic])
        early: list[Message] = []
        poll_until([survivor], lambda: False, lambda _c, r: early.extend(r), 2.0)
        assert early == []
        child.send_signal(signal.SIGKILL)
        child.wait(5)
        killed_at = time.monotonic()
        got: list[Message] = []
        poll_until([survivor], lambda: len(got) >= len(sent), lambda _c, r: got.extend(r), 20)
        waited = time.monotonic() - killed_at
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
        survivor.close()
    assert {m.key() for m in got} == sent
    assert {m.delivery_count() for m in got} == {2}
    # Released by the 3 s session timeout, not by the 30 s acquisition lock.
    assert waited < 15, waited


def test_implicit_close_releases_the_last_poll_to_another_member(broker: BrokerProcess) -> None:
    """librdkafka's close() in implicit mode sends no acceptance for the last poll: the broker
    must release those records when the member leaves, not hold them for the 30 s lock."""
    topic, group = fresh(broker, 1)
    sent = produce(broker.bootstrap, topic, 10)
    first = share_consumer(broker.bootstrap, group)
    first.subscribe([topic])
    got_first: list[Message] = []
    try:
        poll_until([first], lambda: bool(got_first), lambda _c, r: got_first.extend(r), 15)
    finally:
        first.close()
    closed_at = time.monotonic()
    assert {m.key() for m in got_first} == sent
    second = share_consumer(broker.bootstrap, group)
    second.subscribe([topic])
    got: list[Message] = []
    try:
        poll_until([second], lambda: len(got) >= len(sent), lambda _c, r: got.extend(r), 15)
    finally:
        second.close()
    waited = time.monotonic() - closed_at
    assert {m.key() for m in got} == sent
    assert {m.delivery_count() for m in got} == {2}
    assert waited < 10, waited
