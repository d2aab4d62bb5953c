"""confluent-kafka's Producer, Consumer and AdminClient against a `shoal serve` process.

100,000 records go in through an idempotent producer (acks=all) and must come back byte for
byte, in order per partition, before and after a graceful restart and after kill -9.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import TopicCollection
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewPartitions
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import OffsetSpec

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import error_code
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

TOPIC = "roundtrip"
PARTITIONS = 3
N = 100_000
BASE_TS = 1_700_000_000_000  # explicit CreateTime timestamps: BASE_TS + record index


@dataclass(frozen=True, slots=True)
class Sent:
    offset: int
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int


Expected = dict[int, list[Sent]]  # partition -> records in offset order


def _record(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]], int]:
    key = b"key-%06d" % i
    value = (b"value-%06d-" % i).ljust(100, b"v")
    return key, value, [("idx", str(i).encode())], BASE_TS + i


def produce(bootstrap: str, topic: str, indexes: range, **config: object) -> Expected:
    """Send records with an idempotent acks=all producer; what its delivery reports confirmed."""
    confirmed: Expected = {}
    failures: list[str] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failures.append(str(err))
            return
        i = int(msg.key()[4:])
        key, value, headers, ts = _record(i)
        sent = Sent(msg.offset(), key, value, headers, ts)
        confirmed.setdefault(msg.partition(), []).append(sent)

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "on_delivery": report,
            **QUIET,
            **config,
        }
    )
    for i in indexes:
        key, value, headers, ts = _record(i)
        while True:
            try:
                p.produce(topic, value=value, key=key, headers=headers, timestamp=ts)
                break
            except BufferError:
                p.poll(0.05)
        if i % 5000 == 0:
            p.poll(0)
    left = p.flush(30)
    assert left == 0, f"{left} records not delivered in 30 s"
    assert not failures, failures[:5]
    for records in confirmed.values():
        records.sort(key=lambda s: s.offset)
    return confirmed


def consume_all(bootstrap: str, topic: str, expected: Expected, timeout: float = 60.0) -> None:
    """Read every partition from the beginning and compare with what was confirmed."""
    want = {p: len(r) for p, r in expected.items()}
    got: dict[int, list[Message]] = {p: [] for p in expected}
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verifier",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **QUIET,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in expected])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(len(got[p]) < want[p] for p in want):
            for m in c.consume(5000, 0.5):
                assert m.error() is None, m.error()
                got[m.partition()].append(m)
    finally:
        c.close()
    for p, sent in expected.items():
        msgs = got[p]
        assert len(msgs) >= len(sent), f"partition {p}: {len(msgs)} of {len(sent)} records"
        by_offset = {m.offset(): m for m in msgs}
        offsets = [m.offset() for m in msgs]
        assert offsets == sorted(offsets), f"partition {p}: out of order"
        for s in sent:
            m = by_offset.get(s.offset)
            assert m is not None, f"partition {p}: offset {s.offset} missing"
            assert m.key() == s.key, (p, s.offset)
            assert m.value() == s.value, (p, s.offset)
            assert m.headers() == s.headers, (p, s.offset)
            assert m.timestamp() == (1, s.timestamp), (p, s.offset)  # 1: CreateTime


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Expected]]:
    broker = start_broker(tmp_path_factory.mktemp("roundtrip") / "data")
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        expected = produce(broker.bootstrap, TOPIC, range(N))
        assert sum(len(r) for r in expected.values()) == N
        assert len(expected) == PARTITIONS
        for records in expected.values():
            assert [s.offset for s in records] == list(range(len(records)))
        yield broker, expected
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()


def restart(broker: BrokerProcess, *, kill: bool) -> None:
    if kill:
        broker.kill()
    else:
        assert broker.stop() == 0, broker.log()
    broker.start()


def test_every_record_reads_back_in_order(data: tuple[BrokerProcess, Expected]) -> None:
    broker, expected = data
    consume_all(broker.bootstrap, TOPIC, expected)


def test_list_offsets_earliest_and_latest(data: tuple[BrokerProcess, Expected]) -> None:
    broker, expected = data
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets", **QUIET})
    try:
        for p, sent in expected.items():
            low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), 10, cached=False)
            assert (low, high) == (0, len(sent))
    finally:
        c.close()
    a = admin(broker.bootstrap)
    for spec, pick in ((OffsetSpec.earliest(), lambda n: 0), (OffsetSpec.latest(), len)):
        result = a.list_offsets({TopicPartition(TOPIC, p): spec for p in expected})
        for tp, fut in result.items():
            assert fut.result(10).offset == pick(expected[tp.partition])


def test_offsets_for_times_finds_the_first_record_at_or_after(
    data: tuple[BrokerProcess, Expected],
) -> None:
    broker, expected = data
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets", **QUIET})
    try:
        # A timestamp later than every record: no offset (-1).
        late = c.offsets_for_times([TopicPartition(TOPIC, 0, BASE_TS + N + 10_000)], 10)
        assert late[0].offset == -1
        # Before every record: the first one.
        early = c.offsets_for_times([TopicPartition(TOPIC, 0, BASE_TS - 1)], 10)
        assert early[0].offset == 0
        queries = []
        for p, sent in expected.items():
            stamps = [s.timestamp for s in sent]
            for ts in (stamps[len(sent) // 3], stamps[-1] - 7, stamps[5] + 1, stamps[-1]):
                queries.append((p, ts, sent[bisect.bisect_left(stamps, ts)].offset))
        # One query per partition per call: librdkafka keeps one answer per partition.
        got = [
            (p, c.offsets_for_times([TopicPartition(TOPIC, p, ts)], 10)[0].offset)
            for p, ts, _ in queries
        ]
        assert got == [(p, want) for p, _, want in queries]
    finally:
        c.close()


def test_records_survive_graceful_restart(data: tuple[BrokerProcess, Expected]) -> None:
    broker, expected = data
    restart(broker, kill=False)
    consume_all(broker.bootstrap, TOPIC, expected)


def test_acknowledged_records_survive_kill_9(data: tuple[BrokerProcess, Expected]) -> None:
    broker, expected = data
    more = produce(broker.bootstrap, "after-kill", range(20_000))
    restart(broker, kill=True)
    consume_all(broker.bootstrap, TOPIC, expected)
    consume_all(broker.bootstrap, "after-kill", more)
    # The log continues where it ended: new records get the next offsets.
    again = produce(broker.bootstrap, "after-kill", range(20_000, 20_100))
    for p, sent in again.items():
        assert sent[0].offset == len(more.get(p, [])), p


def test_admin_topics(data: tuple[BrokerProcess, Expected]) -> None:
    broker, _ = data
    a = admin(broker.bootstrap)
    create_topic(broker.bootstrap, "admin-a", 2)

    # Duplicate creation: TOPIC_ALREADY_EXISTS (36).
    with pytest.raises(KafkaException) as exc:
        a.create_topics([NewTopic("admin-a", 2, 1)])["admin-a"].result(10)
    assert error_code(exc.value) == KafkaError.TOPIC_ALREADY_EXISTS

    # CreatePartitions: 2 -> 5 works and shows in metadata; shrinking is INVALID_PARTITIONS.
    a.create_partitions([NewPartitions("admin-a", 5)])["admin-a"].result(10)
    md = a.list_topics("admin-a", timeout=10)
    assert len(md.topics["admin-a"].partitions) == 5
    with pytest.raises(KafkaException) as exc:
        a.create_partitions([NewPartitions("admin-a", 3)])["admin-a"].result(10)
    assert error_code(exc.value) == KafkaError.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as exc:
        a.create_partitions([NewPartitions("no-such-topic", 4)])["no-such-topic"].result(10)
    assert error_code(exc.value) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # DeleteTopics: the topic goes away; an unknown topic is UNKNOWN_TOPIC_OR_PART (3).
    a.delete_topics(["admin-a"])["admin-a"].result(10)
    with pytest.raises(KafkaException) as exc:
        a.describe_topics(TopicCollection(["admin-a"]))["admin-a"].result(10)
    assert error_code(exc.value) == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as exc:
        a.delete_topics(["admin-a"])["admin-a"].result(10)
    assert error_code(exc.value) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Deleted and created again: it starts empty.
    create_topic(broker.bootstrap, "admin-a", 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x", **QUIET})
    try:
        wm = c.get_watermark_offsets(TopicPartition("admin-a", 0), 10, cached=False)
        assert wm == (0, 0)
    finally:
        c.close()


def test_produce_auto_creates_topic(data: tuple[BrokerProcess, Expected]) -> None:
    broker, _ = data
    a = admin(broker.bootstrap)
    with pytest.raises(KafkaException):
        a.describe_topics(TopicCollection(["auto-created"]))["auto-created"].result(10)
    sent = produce(broker.bootstrap, "auto-created", range(10))
    md = a.list_topics("auto-created", timeout=10).topics["auto-created"]
    assert md.error is None
    assert len(md.partitions) == 1  # num.partitions default
    assert sum(len(r) for r in sent.values()) == 10
    consume_all(broker.bootstrap, "auto-created", sent)


@pytest.mark.parametrize("topic", ["bad/name", "x" * 250])
def test_create_topic_with_invalid_name_is_refused(
    data: tuple[BrokerProcess, Expected], topic: str
) -> None:
    broker, _ = data
    a = admin(broker.bootstrap)
    try:
        futures = a.create_topics([NewTopic(topic, 1, 1)])
    except (KafkaException, ValueError):
        return  # refused by the client before it reached the broker
    with pytest.raises(KafkaException) as exc:
        futures[topic].result(10)
    assert error_code(exc.value) == KafkaError.TOPIC_EXCEPTION


def test_list_all_topics(data: tuple[BrokerProcess, Expected]) -> None:
    broker, _ = data
    topics = admin(broker.bootstrap).list_topics(timeout=5).topics
    assert TOPIC in topics
    assert len(topics[TOPIC].partitions) == PARTITIONS
