"""confluent-kafka's ShareConsumer on a topic a real transactional producer wrote, with the
share group's `share.isolation.level` at read_committed or read_uncommitted.

Kafka: `GroupConfig.SHARE_ISOLATION_LEVEL_CONFIG` (read_uncommitted by default: "the share
group will return all messages, even transactional messages which have been aborted");
read_committed acquires below the LSO only and archives aborted transactions' records
(`SharePartition.acquire`, `maybeFilterAbortedTransactionalAcquiredRecords`). Control batches
(transaction markers, Shoal's share state) reach no consumer at either level.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer

from tests.brokers import BrokerProcess
from tests.compat.support import COMMITTED
from tests.compat.support import EVERYTHING
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import wait_for_share_acknowledged
from tests.compat.support import write_transactions

pytestmark = pytest.mark.compat

# The `broker` of tests/compat/conftest.py; timed-out transactions are looked for twice a
# second (Kafka's default is every 10 s).
BROKER_CONFIG = {
    **SHORT_SESSION_CONFIG,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
}
QUIET_S = 2.0  # how long "nothing more arrives" is watched for

_names = itertools.count()


def fresh(broker: BrokerProcess, isolation: str | None) -> tuple[str, str]:
    n = next(_names)
    topic, group = f"rc-share-t{n}", f"rc-share-g{n}"
    create_topic(broker.bootstrap, topic, 1)
    configs = {"share.auto.offset.reset": "earliest"}
    if isolation is not None:
        configs["share.isolation.level"] = isolation
    set_group_configs(broker.bootstrap, group, configs)
    return topic, group


class Reader:
    """A ShareConsumer's values by offset (each offset must come once: acknowledged
    implicitly, nothing is delivered again)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer: ShareConsumer = share_consumer(bootstrap, group)
        self.consumer.subscribe([topic])
        self.got: dict[int, str] = {}

    def poll_until(self, done: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            for msg in poll_records(self.consumer, 0.2):
                offset = msg.offset()
                assert offset is not None and offset not in self.got, f"{offset} came twice"
                self.got[offset] = (msg.value() or b"").decode()

    def values(self) -> list[str]:
        return [self.got[o] for o in sorted(self.got)]

    def has(self, expected: list[str]) -> Callable[[], bool]:
        return lambda: len(self.got) >= len(expected)

    def quiet_for(self, seconds: float) -> None:
        """Poll for `seconds`: what arrives in that time is recorded (for "nothing more")."""
        self.poll_until(lambda: False, seconds)

    def close(self) -> None:
        self.consumer.close()


def test_share_isolation_level_is_a_bounded_group_config(broker: BrokerProcess) -> None:
    _, group = fresh(broker, None)
    assert describe_group_configs(broker.bootstrap, group)["share.isolation.level"] == (
        "read_uncommitted"
    )
    set_group_configs(broker.bootstrap, group, {"share.isolation.level": "read_committed"})
    assert describe_group_configs(broker.bootstrap, group)["share.isolation.level"] == (
        "read_committed"
    )
    with pytest.raises(Exception, match="read_uncommitted, read_committed"):
        set_group_configs(broker.bootstrap, group, {"share.isolation.level": "hello"})


def test_read_committed_gets_the_committed_records_and_the_rest_once_the_lso_moves(
    broker: BrokerProcess,
) -> None:
    """The log of `write_transactions`: c1 c2 COMMIT | a1 plain a2 ABORT | open1 (open) | c3
    COMMIT. Only c1 c2 plain come while open1's transaction holds the LSO (c3, committed,
    waits behind it); once it aborts, c3 comes, and open1, a1, a2 never do."""
    topic, group = fresh(broker, "read_committed")
    open_one = write_transactions(broker.bootstrap, topic)
    reader = Reader(broker.bootstrap, group, topic)
    try:
        reader.poll_until(reader.has(COMMITTED))
        reader.quiet_for(QUIET_S)
        assert reader.values() == COMMITTED
        open_one.abort_transaction(30)
        reader.poll_until(reader.has([*COMMITTED, "c3"]))
        reader.quiet_for(QUIET_S)
        assert reader.values() == [*COMMITTED, "c3"]
    finally:
        reader.close()


def test_read_uncommitted_gets_every_data_record_and_no_marker(broker: BrokerProcess) -> None:
    topic, group = fresh(broker, None)  # the default level
    open_one = write_transactions(broker.bootstrap, topic)
    reader = Reader(broker.bootstrap, group, topic)
    try:
        reader.poll_until(reader.has(EVERYTHING))
        open_one.abort_transaction(30)
        reader.quiet_for(QUIET_S)
        assert reader.values() == EVERYTHING  # open1 and the aborted ones too, no marker
    finally:
        reader.close()


def test_nothing_before_the_commit_nothing_of_an_abort(broker: BrokerProcess) -> None:
    topic, group = fresh(broker, "read_committed")
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-p", **QUIET}
    )
    producer.init_transactions(30)
    reader = Reader(broker.bootstrap, group, topic)
    try:
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=b"t%d" % i, partition=0)
        assert producer.flush(30) == 0
        reader.quiet_for(QUIET_S)
        assert reader.values() == []  # delivered to the log, not committed: none yet
        producer.commit_transaction(30)
        reader.poll_until(reader.has(["t0", "t1", "t2", "t3", "t4"]))
        assert reader.values() == ["t0", "t1", "t2", "t3", "t4"]

        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=b"x%d" % i, partition=0)
        assert producer.flush(30) == 0  # in the log before the abort (not purged unsent)
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"t5", partition=0)
        producer.commit_transaction(30)
        reader.poll_until(reader.has(["t0", "t1", "t2", "t3", "t4", "t5"]))
        reader.quiet_for(QUIET_S)
        assert reader.values() == ["t0", "t1", "t2", "t3", "t4", "t5"]
    finally:
        reader.close()


def test_a_transaction_open_at_a_kill_aborts_on_its_timeout_and_the_group_goes_on(
    broker_process: BrokerProcess,
) -> None:
    """kill -9 with a transaction open: after the restart it aborts on its timeout, the LSO
    moves, and the read_committed group gets what waited behind it (a plain record), never the
    aborted records, and none of what it acknowledged before the kill again."""
    broker = broker_process
    topic, group = fresh(broker, "read_committed")
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic}-p",
        "transaction.timeout.ms": 3000, **QUIET,
    })  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"k%d" % i, partition=0)  # 0-3
    producer.commit_transaction(30)  # marker at 4
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"lost%d" % i, partition=0)  # 5-8, left open
    assert producer.flush(30) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    plain.produce(topic, value=b"plain", partition=0)  # 9: behind the LSO
    assert plain.flush(30) == 0

    reader = Reader(broker.bootstrap, group, topic)
    acknowledged = threading.Event()
    # It polls on (its polls acknowledge what it got) until SPSO is past k0-k3 and the marker.
    polling = threading.Thread(target=reader.poll_until, args=(acknowledged.is_set,))
    polling.start()
    try:
        wait_for_share_acknowledged(broker.bootstrap, group, 5)
    finally:
        acknowledged.set()
        polling.join()
        reader.close()
    assert reader.values() == ["k0", "k1", "k2", "k3"]
    broker.kill()
    broker.start()

    reader = Reader(broker.bootstrap, group, topic)
    try:
        reader.poll_until(reader.has(["plain"]))  # once the timeout has aborted lost0-3
        reader.quiet_for(QUIET_S)
        assert reader.values() == ["plain"]
    finally:
        reader.close()
