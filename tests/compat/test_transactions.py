"""Transactions with confluent-kafka (librdkafka): a transactional producer commits and aborts;
read_committed consumers see exactly the committed records in order, read_uncommitted ones
see all; send_offsets_to_transaction commits a group's offsets only on commit; a second
producer with the same transactional.id fences the first; kill -9 with a transaction open.

Kafka's behaviour: `TransactionCoordinator.scala` (InitProducerId fencing, EndTxn), the
read_committed fetch of `UnifiedLog.read` (stops at the last stable offset and returns the
aborted transactions, KIP-98), and `ListOffsets` answering the LSO for read_committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import TopicPartition

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import create_topic

pytestmark = pytest.mark.compat

TOPIC, PARTITIONS = "payments", 2
# Timed-out transactions are looked for twice a second (Kafka's default is every 10 s).
CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


def _producer(bootstrap: str, txn_id: str, **config: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, **QUIET, **config}
    )
    producer.init_transactions(30)
    return producer


def _send(producer: Producer, values: list[str]) -> None:
    """Each value to partition `i % PARTITIONS`, in order, delivered (not yet committed)."""
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _transaction(producer: Producer, values: list[str], commit: bool) -> None:
    producer.begin_transaction()
    _send(producer, values)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def _expected(*batches: list[str]) -> dict[int, list[str]]:
    """What each partition holds of `batches`, in order (values go to `i % PARTITIONS`)."""
    out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for values in batches:
        for i, value in enumerate(values):
            out[i % PARTITIONS].append(value)
    return out


def _read(
    bootstrap: str, isolation: str, done: Callable[[dict[int, list[str]]], bool]
) -> dict[int, list[str]]:
    """Each partition's values from offset 0, polled until `done` (or 30 s)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
         "isolation.level": isolation, "enable.auto.commit": False, **QUIET}
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 30
    try:
        while not done(got) and time.monotonic() < deadline:
            for msg in consumer.consume(100, timeout=0.2):
                if msg.error() is None:
                    got[msg.partition()].append(msg.value().decode())
    finally:
        consumer.close()
    return got


def _read_exactly(
    bootstrap: str, isolation: str, expected: dict[int, list[str]]
) -> dict[int, list[str]]:
    """Read until each partition holds as many values as `expected` says (or 30 s). The last
    value of each partition comes after every value that must not be seen, so any such value
    shows up before the wait ends."""
    return _read(bootstrap, isolation,
                 lambda got: all(len(got[p]) >= len(v) for p, v in expected.items()))  # fmt: skip


def _watermarks(bootstrap: str, isolation: str) -> list[int]:
    """ListOffsets latest per partition, as a consumer of `isolation` asks it."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": isolation,
         **QUIET}
    )  # fmt: skip
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


BROKER_CONFIG = CONFIG
BROKER_PER_TEST = True  # each test starts from an empty broker


@pytest.fixture(autouse=True)
def _topic(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)


def test_read_committed_sees_exactly_the_committed_records_in_order(broker: BrokerProcess) -> None:
    producer = _producer(broker.bootstrap, "ledger-writer")
    first = [f"a{i}" for i in range(10)]
    aborted = [f"b{i}" for i in range(10)]
    last = [f"c{i}" for i in range(10)]
    _transaction(producer, first, commit=True)
    _transaction(producer, aborted, commit=False)
    _transaction(producer, last, commit=True)

    committed = _expected(first, last)
    assert _read_exactly(broker.bootstrap, "read_committed", committed) == committed
    everything = _expected(first, aborted, last)
    assert _read_exactly(broker.bootstrap, "read_uncommitted", everything) == everything


def test_an_open_transaction_holds_read_committed_at_its_first_offset(
    broker: BrokerProcess,
) -> None:
    producer = _producer(broker.bootstrap, "slow-writer")
    _transaction(producer, ["x0", "x1"], commit=True)  # offsets 0 and 1 (its marker) per partition
    producer.begin_transaction()
    _send(producer, ["open0", "open1"])
    # The LSO is the open transaction's first offset: after x and its COMMIT marker.
    assert _watermarks(broker.bootstrap, "read_committed") == [2, 2]
    assert _watermarks(broker.bootstrap, "read_uncommitted") == [3, 3]
    assert _read_exactly(broker.bootstrap, "read_committed", _expected(["x0", "x1"])) == _expected(
        ["x0", "x1"]
    )
    producer.commit_transaction(30)
    assert _watermarks(broker.bootstrap, "read_committed") == [4, 4]
    both = _expected(["x0", "x1"], ["open0", "open1"])
    assert _read_exactly(broker.bootstrap, "read_committed", both) == both


def _group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    client = admin(bootstrap)  # its futures fail if it is destroyed first
    (future,) = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {tp.partition: tp.offset for tp in future.result(10).topic_partitions if tp.offset >= 0}


def test_offsets_sent_to_a_transaction_are_committed_only_with_it(broker: BrokerProcess) -> None:
    group = "transformers"
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **QUIET})
    producer = _producer(broker.bootstrap, "transformer-1")
    try:
        producer.begin_transaction()
        _send(producer, ["out0"])
        producer.send_offsets_to_transaction(
            [TopicPartition(TOPIC, 0, 5)], member.consumer_group_metadata(), 30
        )
        assert _group_offsets(broker.bootstrap, group) == {}  # not before the commit
        producer.commit_transaction(30)
        assert _group_offsets(broker.bootstrap, group) == {0: 5}

        producer.begin_transaction()
        _send(producer, ["out1"])
        producer.send_offsets_to_transaction(
            [TopicPartition(TOPIC, 0, 9)], member.consumer_group_metadata(), 30
        )
        producer.abort_transaction(30)
        assert _group_offsets(broker.bootstrap, group) == {0: 5}  # the abort dropped them
    finally:
        member.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    broker: BrokerProcess,
) -> None:
    zombie = _producer(broker.bootstrap, "singleton")
    zombie.begin_transaction()
    _send(zombie, ["zombie0", "zombie1"])

    successor = _producer(broker.bootstrap, "singleton")  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal()  # fenced: librdkafka's fatal error

    _transaction(successor, ["next0", "next1"], commit=True)
    expected = _expected(["next0", "next1"])
    assert _read_exactly(broker.bootstrap, "read_committed", expected) == expected


def test_a_transaction_open_at_a_kill_is_aborted_on_its_timeout_after_restart(
    broker: BrokerProcess,
) -> None:
    producer = _producer(broker.bootstrap, "crashing", **{"transaction.timeout.ms": 3000})
    first = [f"kept{i}" for i in range(6)]
    _transaction(producer, first, commit=True)
    producer.begin_transaction()
    lost = [f"lost{i}" for i in range(6)]
    _send(producer, lost)
    broker.kill()
    broker.start()

    # The open transaction holds the LSO until its timeout aborts it; then read_committed
    # reaches the log end (after the ABORT marker).
    deadline = time.monotonic() + 30
    while _watermarks(broker.bootstrap, "read_committed") != _watermarks(
        broker.bootstrap, "read_uncommitted"
    ):
        assert time.monotonic() < deadline, "the open transaction was never aborted"
        time.sleep(0.2)
    after = _producer(broker.bootstrap, "crashing")
    last = [f"after{i}" for i in range(6)]
    _transaction(after, last, commit=True)

    committed = _expected(first, last)
    assert _read_exactly(broker.bootstrap, "read_committed", committed) == committed
    everything = _expected(first, lost, last)
    assert _read_exactly(broker.bootstrap, "read_uncommitted", everything) == everything
