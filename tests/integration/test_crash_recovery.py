"""Damaged logs and kill -9: the broker restarts, serves every whole batch, and loses nothing
that it acknowledged.

Real `shoal serve` processes, confluent-kafka's Producer and Consumer over real sockets, and
the segment file edited on disk between runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic

from protocol.record_batch import BatchHeader
from protocol.record_batch import iter_batch_headers
from tests.brokers import BrokerProcess

pytestmark = pytest.mark.integration

TOPIC = "crash"
QUIET = {"log_level": 3}


def start(data_dir: Path, port: int | None = None, **config: object) -> BrokerProcess:
    extra: list[str] = []
    if config:
        props = data_dir.parent / "broker.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        extra = ["--config", str(props)]
    broker = BrokerProcess(data_dir, port=port, extra=extra)
    broker.start()
    return broker


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    """Every broker a test starts; any still running at the end is killed."""
    started: list[BrokerProcess] = []
    yield started
    for b in started:
        if b.proc is not None and b.proc.poll() is None:
            b.kill()


def create_topic(bootstrap: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    client.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)


def produce_batches(bootstrap: str, batches: int, per_batch: int, start: int = 0) -> list[int]:
    """`batches` flushes of `per_batch` records each; the offsets the delivery reports gave."""
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            assert int(msg.key()) == start + len(offsets)
            offsets.append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1000, **QUIET})
    i = start
    for _ in range(batches):
        for _ in range(per_batch):
            p.produce(TOPIC, key=b"%d" % i, value=value(i), on_delivery=report)
            i += 1
        assert p.flush(10) == 0
    assert not errors, errors[:3]
    return offsets


def value(i: int) -> bytes:
    return (b"record-%d-" % i).ljust(64, b".")


def read_all(bootstrap: str, timeout: float = 20.0) -> list[Message]:
    """Every record of the partition, from the beginning up to the high watermark."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    try:
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), 10, cached=False)
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not out or out[-1].offset() < high - 1):
            for m in c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append(m)
        return out
    finally:
        c.close()


def high_watermark(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw", **QUIET})
    try:
        return int(c.get_watermark_offsets(TopicPartition(TOPIC, 0), 10, cached=False)[1])
    finally:
        c.close()


def segment(data_dir: Path) -> Path:
    return data_dir / f"{TOPIC}-0" / "00000000000000000000.log"


def batches_in(path: Path) -> list[tuple[int, BatchHeader]]:
    return list(iter_batch_headers(path.read_bytes()))


def assert_serves_prefix_then_continues(broker: BrokerProcess, keep: int) -> None:
    """Offsets 0..keep-1 are served intact, nothing after; new records continue at `keep`."""
    records = read_all(broker.bootstrap)
    assert [m.offset() for m in records] == list(range(keep))
    for m in records:
        assert m.value() == value(int(m.key())), m.offset()
        assert int(m.key()) == m.offset()
    assert high_watermark(broker.bootstrap) == keep
    more = produce_batches(broker.bootstrap, 2, 5, start=keep)
    assert more == list(range(keep, keep + 10))
    again = read_all(broker.bootstrap)
    assert [m.offset() for m in again] == list(range(keep + 10))
    assert [m.value() for m in again[keep:]] == [value(i) for i in range(keep, keep + 10)]


def test_segment_cut_inside_its_last_batch(data_dir: Path, brokers: list[BrokerProcess]) -> None:
    broker = start(data_dir)
    brokers.append(broker)
    create_topic(broker.bootstrap)
    offsets = produce_batches(broker.bootstrap, batches=20, per_batch=10)
    assert offsets == list(range(200))
    assert broker.stop() == 0, broker.log()

    path = segment(data_dir)
    found = batches_in(path)
    assert sum(h.record_count for _, h in found) == 200
    pos, last = found[-1]
    assert pos + last.size == path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(pos + last.size // 2)

    again = start(data_dir, port=broker.port)
    brokers.append(again)
    assert_serves_prefix_then_continues(again, keep=last.base_offset)


def flip_byte_in_last_batch(data_dir: Path) -> BatchHeader:
    return flip_byte_in_batch(data_dir, -1)


def flip_byte_in_batch(data_dir: Path, which: int) -> BatchHeader:
    path = segment(data_dir)
    pos, batch = batches_in(path)[which]
    with path.open("r+b") as f:
        f.seek(pos + batch.size - 5)  # inside the last record: the batch CRC32C no longer matches
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x5A]))
    return batch


def test_flipped_byte_in_last_batch_after_kill_9(
    data_dir: Path, brokers: list[BrokerProcess]
) -> None:
    """An unclean shutdown makes the broker check the active segment's CRCs and truncate."""
    broker = start(data_dir, **{"log.flush.interval.messages": 1})
    brokers.append(broker)
    create_topic(broker.bootstrap)
    assert produce_batches(broker.bootstrap, batches=20, per_batch=10) == list(range(200))
    broker.kill()
    last = flip_byte_in_last_batch(data_dir)

    again = start(data_dir, port=broker.port)
    brokers.append(again)
    assert_serves_prefix_then_continues(again, keep=last.base_offset)


def test_flipped_byte_after_clean_stop_costs_the_client_only_that_batch(
    data_dir: Path, brokers: list[BrokerProcess]
) -> None:
    """After a clean shutdown the segments are trusted without a scan; the damaged batch is
    found when first read (its CRC), never served (a client checking CRCs sees no bad batch),
    and stepped over: its offsets are served as an empty batch over them, which the client
    passes as it passes compaction's, and every record before and after it is delivered. It
    used to answer CORRUPT_MESSAGE, and librdkafka fetches the same offset again after such an
    error, for ever: the partition stopped at the damage."""
    broker = start(data_dir)
    brokers.append(broker)
    create_topic(broker.bootstrap)
    assert produce_batches(broker.bootstrap, batches=5, per_batch=10) == list(range(50))
    assert broker.stop() == 0, broker.log()
    damaged = flip_byte_in_batch(data_dir, 2)

    again = start(data_dir, port=broker.port)
    brokers.append(again)
    c = Consumer(
        {
            "bootstrap.servers": again.bootstrap,
            "group.id": "crc",
            "check.crcs": True,
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    good: list[Message] = []
    bad: list[KafkaError] = []
    lost = range(damaged.base_offset, damaged.last_offset + 1)
    try:
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(good) < 50 - len(lost) and not bad:
            for m in c.consume(100, 0.5):
                err = m.error()
                if err is None:
                    good.append(m)
                else:
                    bad.append(err)
    finally:
        c.close()
    assert bad == []
    assert [m.offset() for m in good] == [o for o in range(50) if o not in lost]
    assert again.log_path.read_text().count("damaged record batches stepped over") == 1


def test_kill_9_mid_stream_loses_no_acknowledged_record(
    data_dir: Path, brokers: list[BrokerProcess]
) -> None:
    broker = start(data_dir, **{"log.flush.interval.messages": 1})
    brokers.append(broker)
    create_topic(broker.bootstrap)
    acked: dict[int, int] = {}  # record index -> offset, from successful delivery reports
    failed: list[int] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked[int(msg.key())] = msg.offset()
        else:
            failed.append(int(msg.key()))

    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 4000,
            "reconnect.backoff.max.ms": 200,
            **QUIET,
        }
    )
    killer = threading.Timer(1.0, broker.kill)
    killer.start()
    sent = 0
    deadline = time.monotonic() + 2.0  # produce before, during and after the kill
    try:
        while time.monotonic() < deadline:
            try:
                p.produce(TOPIC, key=b"%d" % sent, value=value(sent), on_delivery=report)
                sent += 1
            except BufferError:
                p.poll(0.01)
            if sent % 100 == 0:
                p.poll(0.005)  # about 20,000 records a second: enough in flight at the kill
        killer.join()
        p.purge()
        p.flush(5)
    finally:
        killer.cancel()
    assert broker.proc is not None and broker.proc.returncode == -9
    assert len(acked) > 100, f"only {len(acked)} records acknowledged before the kill"
    assert len(acked) < sent, "the kill came after every record was acknowledged"

    again = start(data_dir, port=broker.port)
    brokers.append(again)
    records = {m.offset(): m for m in read_all(again.bootstrap)}
    assert sorted(records) == list(range(len(records))), "holes in the recovered log"
    missing = [i for i, off in acked.items() if off not in records]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    for i, off in acked.items():
        assert records[off].key() == b"%d" % i
        assert records[off].value() == value(i)
    # New records continue after what was recovered.
    end = len(records)
    assert produce_batches(again.bootstrap, 1, 5, start=10**6) == list(range(end, end + 5))
