"""Compacted topics (issue 11) with confluent-kafka's real clients and a broker process.

A null key is refused with INVALID_RECORD; a Consumer reads the latest value of each key once
the cleaner has run; and a share group consuming a compacted topic under a running cleaner,
with the broker killed (kill -9) several times, gets every record that survives cleaning and
never a record again after its ACCEPT was confirmed.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import ConfigSource
from confluent_kafka.admin import NewTopic

from protocol.record_batch import iter_batch_headers
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import set_group_configs
from tests.compat.support import share_worker_rows
from tests.compat.support import start_broker
from tests.compat.support import start_share_worker

pytestmark = pytest.mark.compat

# The cleaner wakes every 200 ms; segments roll after 4 KiB or one second.
BROKER = {"log.cleaner.backoff.ms": 200, "log.flush.interval.ms": 1000}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
}


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    client = admin(bootstrap)  # the futures fail if their client is destroyed first
    futures = client.create_topics([NewTopic(topic, partitions, 1, config=COMPACTED)])
    for f in futures.values():
        f.result(10)


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})


def _read_all(bootstrap: str, topic: str, partition: int = 0) -> list[Message]:
    """Every record of a partition from offset 0 with a plain Consumer (2 s of quiet ends it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", **QUIET})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[Message] = []
    idle = 0
    while idle < 2:
        batch = c.consume(1000, timeout=1)
        idle = 0 if batch else idle + 1
        out.extend(m for m in batch if m.error() is None)
    c.close()
    return out


def _cleaning_reports(log_path: Path) -> list[dict[str, object]]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [json.loads(line) for line in lines if '"log cleaned"' in line]


def _cleaning_passes(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count('"log cleaned"')


def test_null_key_on_a_compacted_topic_fails_with_invalid_record(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "data", BROKER)
    try:
        _create(broker.bootstrap, "compacted")
        results: list[KafkaError | None] = []
        producer = _producer(broker.bootstrap)
        producer.produce(
            "compacted", key=b"k", value=b"keyed", on_delivery=lambda e, m: results.append(e)
        )
        assert producer.flush(10) == 0  # a batch with one null key is refused whole, as Kafka
        producer.produce("compacted", value=b"no key", on_delivery=lambda e, m: results.append(e))
        assert producer.flush(10) == 0
        assert results[0] is None
        assert results[1] is not None and results[1].code() == KafkaError.INVALID_RECORD
        assert "rejected records" in broker.log()
    finally:
        broker.stop()


def test_keyless_records_fail_alone_and_the_others_go_through_on_retry(tmp_path: Path) -> None:
    """KIP-467: the batch fails whole, but the answer names the bad records (`record_errors`,
    Produce v8+), so the client fails them with INVALID_RECORD and the others with
    _INVALID_DIFFERENT_RECORD, which it may send again. Kafka: LogValidator's `validateKey`
    and `processRecordErrors` (one RecordError per keyless record, by index in its batch), and
    ReplicaManager's `appendToLocalLog` (`RecordValidationException`: no offset, the log start
    offset, the record errors and a message). Two keyless records: librdkafka 2.16 fails every
    record of the batch with INVALID_RECORD when the answer names only one (FINDINGS.md)."""
    broker = start_broker(tmp_path / "data", BROKER)
    keyless = {37, 73}
    try:
        _create(broker.bootstrap, "compacted")
        delivered: dict[int, KafkaError | None] = {}
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 500, **QUIET}
        )

        def send(i: int) -> None:
            key = None if i in keyless else b"k%d" % i
            producer.produce("compacted", key=key, value=b"v%d" % i, partition=0,
                             on_delivery=lambda e, m, i=i: delivered.__setitem__(i, e))  # fmt: skip

        for i in range(100):
            send(i)
        assert producer.flush(10) == 0
        errors = {i: e.code() for i, e in delivered.items() if e is not None}
        assert errors == {
            i: KafkaError.INVALID_RECORD if i in keyless else KafkaError._INVALID_DIFFERENT_RECORD
            for i in range(100)
        }, "the batch was not refused with record errors naming the keyless records"
        delivered.clear()
        for i in range(100):
            if i not in keyless:
                send(i)
        assert producer.flush(10) == 0
        assert delivered == {i: None for i in range(100) if i not in keyless}
        assert len(_read_all(broker.bootstrap, "compacted")) == 98
    finally:
        broker.stop()


def test_switching_a_topic_to_compact_with_incremental_alter_configs_takes_effect(
    tmp_path: Path,
) -> None:
    broker = start_broker(tmp_path / "data", BROKER)
    try:
        client = admin(broker.bootstrap)
        futures = client.create_topics([NewTopic("switched", 1, 1)])
        for f in futures.values():
            f.result(10)
        results: list[KafkaError | None] = []
        producer = _producer(broker.bootstrap)
        producer.produce("switched", value=b"no key", on_delivery=lambda e, m: results.append(e))
        assert producer.flush(10) == 0
        compact = ConfigEntry(
            "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource("topic", "switched", incremental_configs=[compact])
        client.incremental_alter_configs([resource])[resource].result(10)
        producer.produce("switched", value=b"no key", on_delivery=lambda e, m: results.append(e))
        assert producer.flush(10) == 0
        assert results[0] is None
        assert results[1] is not None and results[1].code() == KafkaError.INVALID_RECORD
    finally:
        broker.stop()


def test_consumer_reads_the_latest_value_of_each_key_after_cleaning(tmp_path: Path) -> None:
    keys, versions = 50, 20
    broker = start_broker(tmp_path / "data", BROKER)
    try:
        _create(broker.bootstrap, "latest")
        producer = _producer(broker.bootstrap)
        for v in range(versions):
            for k in range(keys):
                producer.produce("latest", key=b"k%d" % k, value=b"k%d=%d" % (k, v))
            producer.flush(10)
        time.sleep(1.2)  # past segment.ms: the next append rolls, sealing everything above
        producer.produce("latest", key=b"end", value=b"end")
        assert producer.flush(10) == 0
        deadline = time.monotonic() + 30
        while True:
            got = _read_all(broker.bootstrap, "latest")
            if len(got) == keys + 1 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert _cleaning_passes(broker.log_path) > 0
    finally:
        broker.stop()
    values = {m.key(): m.value() for m in got}
    assert len(got) == keys + 1, f"{len(got)} records read"
    assert values == {
        **{b"k%d" % k: b"k%d=%d" % (k, versions - 1) for k in range(keys)},
        b"end": b"end",
    }
    offsets = [m.offset() for m in got]
    assert offsets == sorted(offsets) and offsets[-1] == keys * versions


def test_a_topic_without_its_own_policy_follows_log_cleanup_policy_compact(
    tmp_path: Path,
) -> None:
    """The broker defaults of the cleaner's topic configs (Kafka's log.cleanup.policy,
    log.cleaner.min.cleanable.ratio, ...): a topic auto-created by a Producer, with no config
    of its own, is compacted: a null key is refused and the cleaner keeps the latest values."""
    keys, versions = 20, 10
    broker_config = {
        **BROKER,
        "log.cleanup.policy": "compact",
        "log.cleaner.min.cleanable.ratio": "0.01",
        "log.cleaner.min.compaction.lag.ms": "0",
        "log.segment.bytes": "4096",
        "log.roll.ms": "1000",
    }
    broker = start_broker(tmp_path / "data", broker_config)
    try:
        results: list[KafkaError | None] = []
        producer = _producer(broker.bootstrap)
        producer.produce("auto", key=b"k0", value=b"first", on_delivery=lambda e, m: None)
        assert producer.flush(10) == 0  # the topic is auto-created, with no configs of its own
        producer.produce("auto", value=b"no key", on_delivery=lambda e, m: results.append(e))
        assert producer.flush(10) == 0
        for v in range(versions):
            for k in range(keys):
                producer.produce("auto", key=b"k%d" % k, value=b"k%d=%d" % (k, v))
            producer.flush(10)
        time.sleep(1.2)  # past log.roll.ms: the next append rolls, sealing everything above
        producer.produce("auto", key=b"end", value=b"end")
        assert producer.flush(10) == 0
        resource = ConfigResource("topic", "auto")
        client = admin(broker.bootstrap)  # the futures fail if their client is destroyed first
        described = client.describe_configs([resource])[resource].result(10)
        deadline = time.monotonic() + 30
        while True:
            got = _read_all(broker.bootstrap, "auto")
            if len(got) == keys + 1 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        broker.stop()
    assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD
    policy = described["cleanup.policy"]
    assert (policy.value, policy.source) == ("compact", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert described["min.cleanable.dirty.ratio"].value == "0.01"
    assert len(got) == keys + 1, f"{len(got)} records read"
    assert {m.key(): m.value() for m in got} == {
        **{b"k%d" % k: b"k%d=%d" % (k, versions - 1) for k in range(keys)},
        b"end": b"end",
    }


CODECS = ("gzip", "snappy", "lz4", "zstd")


def _stored_codecs(data: Path, topic: str) -> set[int]:
    """The codecs of the data batches in a partition's segment files, from their headers."""
    codecs = set()
    for path in sorted((data / f"{topic}-0").glob("*.log")):
        for _, header in iter_batch_headers(path.read_bytes()):
            if header.record_count and not header.is_control:
                codecs.add(header.compression)
    return codecs


def _value(codec: str, key: int, version: int) -> bytes:
    return b"%s k%d=%d " % (codec.encode(), key, version) * 8  # repeats: it compresses


def _latest(key: int, keys: int, versions: int) -> int:
    return versions - 1 if key < keys // 2 else versions - 2


def test_every_codec_librdkafka_uses_is_compacted_and_read_back(tmp_path: Path) -> None:
    """A Producer with compression.type gzip, snappy (raw, as librdkafka sends it), lz4 and
    zstd writes to compacted topics; the cleaner keeps the latest value of each key, and a
    Consumer reads those back. The last round updates half the keys, so the round before loses
    half its batch: the surviving run is re-encoded with the batch's codec (snappy in xerial
    framing) and librdkafka must read it."""
    keys, versions = 30, 8
    data = tmp_path / "data"
    broker = start_broker(data, BROKER)
    got: dict[str, list[Message]] = {}
    errors: list[KafkaError] = []
    try:
        for codec in CODECS:
            topic = f"codec-{codec}"
            _create(broker.bootstrap, topic)
            producer = Producer(
                {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
                 "compression.type": codec, **QUIET}
            )  # fmt: skip
            for v in range(versions):
                for k in range(keys if v < versions - 1 else keys // 2):
                    producer.produce(
                        topic, key=b"k%d" % k, value=_value(codec, k, v),
                        on_delivery=lambda e, m: errors.append(e) if e else None,
                    )  # fmt: skip
                producer.flush(10)
            time.sleep(1.2)  # past segment.ms: the next append rolls, sealing the rest
            producer.produce(topic, key=b"end", value=b"end")
            assert producer.flush(10) == 0
            assert errors == [], f"{codec}: {errors[:3]}"
        deadline = time.monotonic() + 40
        for codec in CODECS:
            while True:
                got[codec] = _read_all(broker.bootstrap, f"codec-{codec}")
                if len(got[codec]) == keys + 1 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        passes = _cleaning_reports(broker.log_path)
    finally:
        broker.stop()
    # Every topic was cleaned, and the cleaner read every batch it met.
    assert {p["topic"] for p in passes} == {f"codec-{c}" for c in CODECS}, passes
    assert all(p["unreadable_batches"] == 0 for p in passes), passes
    for number, codec in enumerate(CODECS, start=1):
        values = {m.key(): m.value() for m in got[codec]}
        assert len(got[codec]) == keys + 1, f"{codec}: {len(got[codec])} records read"
        assert values == {
            **{b"k%d" % k: _value(codec, k, _latest(k, keys, versions)) for k in range(keys)},
            b"end": b"end",
        }
        # librdkafka sends a batch uncompressed when compressing would not shrink it ("end").
        stored = _stored_codecs(data, f"codec-{codec}")
        assert number in stored and stored <= {0, number}, (codec, stored)


TOPIC, GROUP, PARTITIONS, KEYS, ROUNDS, KILLS = "compact-crash", "compact-group", 2, 300, 6, 3


def _produce_rounds(bootstrap: str) -> int:
    producer = _producer(bootstrap)
    produced = 0
    for r in range(ROUNDS):
        for k in range(KEYS):
            producer.produce(TOPIC, key=b"k%d" % k, value=b"%d" % r, partition=k % PARTITIONS)
            produced += 1
            if produced % 50 == 0:
                producer.flush(10)
    assert producer.flush(10) == 0
    return produced


class _Writer(threading.Thread):
    """New versions of every key, a round every 200 ms, while the group consumes: segments keep
    rolling over the share-state control records, so checkpoints land in sealed segments that
    the cleaner rewrites. The broker may die under it; what it lost does not matter."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stopped = threading.Event()
        self.produced = 0

    def run(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "message.timeout.ms": 3000,
             "log_level": 0}
        )  # fmt: skip
        r = 0
        while not self.stopped.wait(0.2):
            with contextlib.suppress(BufferError):
                for k in range(KEYS):
                    producer.produce(TOPIC, key=b"k%d" % k, value=b"w%d" % r, partition=k % 2)
                    self.produced += 1
            producer.poll(0)
            r += 1
        producer.flush(3)


def _survivors(bootstrap: str) -> set[tuple[int, int]]:
    return {(p, m.offset()) for p in range(PARTITIONS) for m in _read_all(bootstrap, TOPIC, p)}


def test_share_group_on_a_compacted_topic_under_the_cleaner_across_kill_9(tmp_path: Path) -> None:
    rng = random.Random(11)
    data = tmp_path / "data"
    broker = start_broker(data, BROKER)
    _create(broker.bootstrap, TOPIC, PARTITIONS)
    set_group_configs(broker.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
    produced = 0

    cycles: list[list[tuple[str, int, int]]] = []
    passes: list[int] = []
    for cycle in range(KILLS + 1):
        out = tmp_path / f"cycle-{cycle}.txt"
        out.touch()
        before = _cleaning_passes(broker.log_path)
        produced += _produce_rounds(broker.bootstrap)  # new versions of every key each cycle
        worker = start_share_worker(broker.bootstrap, GROUP, TOPIC, out)
        try:
            if cycle < KILLS:
                writer = _Writer(broker.bootstrap)
                writer.start()
                time.sleep(rng.uniform(2.0, 3.5))
                broker.kill()  # kill -9 the broker while it consumes and cleans
                writer.stopped.set()
                writer.join()
                produced += writer.produced
                time.sleep(0.3)
            else:  # the last cycle drains what is left: everything that survives cleaning
                time.sleep(3)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    confirmed = {
                        (p, o)
                        for c in [*cycles, share_worker_rows(out)]
                        for k, p, o in c
                        if k == "C"
                    }
                    if _survivors(broker.bootstrap) <= confirmed:
                        break
                    time.sleep(1)
        finally:
            worker.kill()
            worker.wait()
        passes.append(_cleaning_passes(broker.log_path) - before)
        cycles.append(share_worker_rows(out))
        if cycle < KILLS:
            broker = start_broker(data, BROKER)
    survivors = _survivors(broker.bootstrap)
    broker.stop()

    delivered_before: set[tuple[int, int]] = set()
    confirmed_before: set[tuple[int, int]] = set()
    for rows in cycles:
        delivered = {(p, o) for k, p, o in rows if k == "D"}
        # No record whose acknowledgement was confirmed in an earlier cycle comes back.
        assert not delivered & confirmed_before, sorted(delivered & confirmed_before)[:10]
        delivered_before |= delivered
        confirmed_before |= {(p, o) for k, p, o in rows if k == "C"}
    # Every record that survived cleaning was delivered and, by the end, confirmed.
    assert survivors <= confirmed_before, sorted(survivors - confirmed_before)[:10]
    # Share state from the ESO on was never cleaned: every restart found its checkpoint where
    # the snapshot file said (recovery can fall back on a scan, which would hide a loss).
    assert "no intact checkpoint" not in broker.log_path.read_text(errors="replace")
    # The cleaner ran while the group consumed and removed records (those were archived).
    assert sum(passes) > 0, passes
    assert all(any(k == "D" for k, _, _ in c) for c in cycles[:KILLS])  # kills hit mid-stream
    assert len(survivors) < produced
    assert len(delivered_before) < produced, json.dumps(passes)
