"""Damaged and lost segment files under a real broker and confluent-kafka's clients (issues 9, 28).

16 bytes flipped in the middle of an old segment used to make every ShareFetch on the
partition fail with a traceback (0 of 3,000 records delivered) while the log grew by megabytes.
A damaged batch header (a negative length, a wrong magic byte) still did, and stopped a plain
Consumer at the damaged segment; a damaged share-state control batch stopped a plain Consumer
with CORRUPT_MESSAGE at an offset it never sees; a deleted or cut segment file, or a base offset
raised outside the CRC, lost records without a word.

Now every kind costs the offsets it held and nothing more: the damage (or the gap) is logged
once with its file and offsets and counted (`shoal_log_damaged_records`,
`shoal_log_missing_records`), a share group gets every other record, and so does a plain
Consumer: Fetch serves damaged offsets as an empty batch over them (a header with no records,
as compaction leaves), and librdkafka moves its fetch position past any batch's last offset,
records or not (`rd_kafka_msgset_reader_v2` in src/rdkafka_msgset_reader.c, KAFKA-5443).
Answering CORRUPT_MESSAGE instead stops it for good: librdkafka reports the error and fetches
the same offset again after a backoff (`rd_kafka_fetch_reply_handle_partition_error`).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.request import FetchTopic

from client.connection import Connection
from protocol.messages import build
from protocol.record_batch import BatchHeader
from protocol.record_batch import iter_batch_headers
from tests.brokers import BrokerProcess
from tests.brokers import free_port
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = pytest.mark.compat

TOPIC, GROUP, RECORDS = "damaged", "damaged-group", 3000
DAMAGE = "damaged record batches stepped over"
GAP = "offsets missing between segments"


def _fetch(port: int, offset: int) -> tuple[int, bytes]:
    """A raw Fetch v12 of partition 0 at `offset`: (error code, records)."""

    async def fetch() -> tuple[int, bytes]:
        conn = await Connection.open("127.0.0.1", port)
        try:
            partition = build(
                FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20,
            )  # fmt: skip
            response = await conn.request(
                build(
                    FetchRequest, replica_id=-1, max_wait=datetime.timedelta(milliseconds=10),
                    min_bytes=1, max_bytes=1 << 20, session_epoch=-1, rack_id="",
                    topics=(FetchTopic(topic=TOPIC, partitions=(partition,)),),  # type: ignore[arg-type]
                )
            )  # fmt: skip
            answer = response.responses[0].partitions[0]
            return int(answer.error_code), bytes(answer.records or b"")
        finally:
            await conn.close()

    return asyncio.run(fetch())


def _produce(bootstrap: str, topic: str, partitions: int, records: int, start: int = 0) -> None:
    """`records` per partition in batches of about 20, so segments hold many batches."""
    p = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 20, **QUIET})
    for i in range(start, start + records):
        for partition in range(partitions):
            p.produce(topic, value=b"record-%06d" % i, partition=partition)
        if i % 20 == 19:
            p.flush(10)
    assert p.flush(10) == 0


def _plain_offsets(
    bootstrap: str, topic: str, partitions: int, want: int, timeout: float = 60
) -> dict[int, set[int]]:
    """Every offset a plain Consumer (CRCs checked) gets from the start of each partition,
    until `want` in all or the deadline; any error it reports fails the test."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "plain", "check.crcs": True, **QUIET})
    got: dict[int, set[int]] = {p: set() for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and sum(map(len, got.values())) < want:
            for m in c.consume(1000, 0.5):
                err = m.error()
                assert err is None or err.code() == KafkaError._PARTITION_EOF, err
                if err is None:
                    got[m.partition()].add(m.offset())
    finally:
        c.close()
    return got


def _share_offsets(
    bootstrap: str,
    group: str,
    topic: str,
    partitions: int,
    want: int | set[int],
    timeout: float = 60,
) -> dict[int, set[int]]:
    """Every offset a share consumer of `group` gets, until `want` offsets (or, for a set,
    those of partition 0) or the deadline."""
    consumer = share_consumer(bootstrap, group)
    consumer.subscribe([topic])
    got: dict[int, set[int]] = {p: set() for p in range(partitions)}

    def done() -> bool:
        if isinstance(want, set):
            return want <= got[0]
        return sum(map(len, got.values())) >= want

    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not done():
            for m in poll_records(consumer):
                got[m.partition()].add(m.offset())
    finally:
        consumer.close()
    return got


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as page:
        for line in page.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    raise AssertionError(f"no {name}")


def _log_events(broker: BrokerProcess) -> list[dict[str, object]]:
    text = broker.log_path.read_text()
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def _batches(path: Path) -> list[tuple[int, BatchHeader]]:
    return list(iter_batch_headers(path.read_bytes()))


def _segments(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def _set(path: Path, at: int, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[at : at + len(new)] = new
    path.write_bytes(bytes(data))


def _damage_a_sealed_segment(partition_dir: Path) -> tuple[int, int]:
    """Flip 16 bytes inside a batch in the middle of the second segment; its offsets."""
    second = _segments(partition_dir)[1]
    data = bytearray(second.read_bytes())
    batches = _batches(second)
    pos, header = batches[len(batches) // 2]
    data[pos + 70 : pos + 86] = bytes(b ^ 0xFF for b in data[pos + 70 : pos + 86])
    second.write_bytes(bytes(data))
    return header.base_offset, header.last_offset


def test_a_damaged_segment_costs_only_its_damaged_batch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    props = tmp_path / "broker.properties"
    props.write_text("log.segment.bytes=16384\n")
    metrics_port = free_port()
    broker = BrokerProcess(data, extra=["--config", str(props)])
    with broker:
        create_topic(broker.bootstrap, TOPIC, 1)
        set_group_configs(broker.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
        _produce(broker.bootstrap, TOPIC, 1, RECORDS)
        assert broker.stop() == 0
    first, last = _damage_a_sealed_segment(data / f"{TOPIC}-0")
    assert 0 < first <= last < RECORDS - 1
    kept = set(range(RECORDS)) - set(range(first, last + 1))

    extra = ["--config", str(props), "--metrics-port", str(metrics_port)]
    with BrokerProcess(data, port=broker.port, extra=extra) as broker:
        got = _share_offsets(broker.bootstrap, GROUP, TOPIC, 1, len(kept))
        assert got[0] == kept
        assert _plain_offsets(broker.bootstrap, TOPIC, 1, len(kept))[0] == kept
        # A Fetch of the damaged offsets gets their stand-in, an empty batch over them, and
        # the batches after it in the same answer (issue 29: as past compaction's).
        code, records = _fetch(broker.port, first)
        (_, stand_in), (_, after), *_ = iter_batch_headers(records)
        assert code == ErrorCode.none
        assert (stand_in.base_offset, stand_in.last_offset, stand_in.record_count) == (
            first, last, 0,
        )  # fmt: skip
        assert after.base_offset == last + 1 and after.record_count > 0
        assert _fetch(broker.port, last + 1)[0] == ErrorCode.none
        assert _metric(metrics_port, "shoal_log_damaged_records") == last - first + 1
        broker.kill()
    lines = _log_events(broker)
    damage = [e for e in lines if e.get("event") == DAMAGE]
    assert [d["offsets"] for d in damage] == [[first, last]]  # once, however often it was read
    assert not [e for e in lines if e.get("exception")]  # no traceback


@dataclass(frozen=True)
class Case:
    """One kind of damage done to partition `partition`'s second segment (at rest)."""

    name: str
    damage: Callable[[Path], tuple[str, str, int, int]]  # -> (event, file, first, last lost)


def _middle(segment: Path) -> tuple[int, BatchHeader]:
    batches = _batches(segment)
    return batches[len(batches) // 2]


def negative_length(directory: Path) -> tuple[str, str, int, int]:
    second = _segments(directory)[1]
    pos, header = _middle(second)
    _set(second, pos + 8, (-5).to_bytes(4, "big", signed=True))
    return DAMAGE, str(second), header.base_offset, header.last_offset


def wrong_magic(directory: Path) -> tuple[str, str, int, int]:
    second = _segments(directory)[1]
    pos, header = _middle(second)
    _set(second, pos + 16, b"\x07")
    return DAMAGE, str(second), header.base_offset, header.last_offset


def flipped_midpoint(directory: Path) -> tuple[str, str, int, int]:
    second = _segments(directory)[1]
    data = bytearray(second.read_bytes())
    mid = len(data) // 2
    hit = [h for pos, h in _batches(second) if pos < mid + 16 and mid < pos + h.size]
    data[mid : mid + 16] = bytes(b ^ 0xFF for b in data[mid : mid + 16])
    second.write_bytes(bytes(data))
    return DAMAGE, str(second), hit[0].base_offset, hit[-1].last_offset


def deleted_segment(directory: Path) -> tuple[str, str, int, int]:
    _, second, third, *_ = _segments(directory)
    second.unlink()
    return GAP, str(third), int(second.stem), int(third.stem) - 1


def cut_in_half(directory: Path) -> tuple[str, str, int, int]:
    """Truncated to half its size: at a batch boundary a gap, inside a batch damage."""
    second, third = _segments(directory)[1:3]
    half = second.stat().st_size // 2
    lost = next(h for pos, h in _batches(second) if pos + h.size > half)
    starts = {pos for pos, _ in _batches(second)}
    with second.open("r+b") as f:
        f.truncate(half)
    event, where = (GAP, third) if half in starts else (DAMAGE, second)
    return event, str(where), lost.base_offset, int(third.stem) - 1


def raised_base_offset(directory: Path) -> tuple[str, str, int, int]:
    """The batch the segment's first offset index entry names: +50 on its base offset."""
    second = _segments(directory)[1]
    index = second.with_suffix(".index").read_bytes()
    position = int.from_bytes(index[4:8], "big")
    header = dict(_batches(second))[position]
    _set(second, position, (header.base_offset + 50).to_bytes(8, "big"))
    return DAMAGE, str(second), header.base_offset, header.last_offset


CASES = [
    Case("negative length", negative_length),
    Case("wrong magic", wrong_magic),
    Case("16 bytes flipped at the midpoint", flipped_midpoint),
    Case("middle segment deleted", deleted_segment),
    Case("segment cut in half", cut_in_half),
    Case("base offset raised by 50", raised_base_offset),
]


def test_each_kind_of_header_damage_or_lost_file_costs_only_what_it_held(
    tmp_path: Path,
) -> None:
    """Each partition of one topic gets one kind of damage; then a plain Consumer and a share
    group read everything else, and each damage is said once with its file and offsets."""
    topic, group, partitions = "kinds", "kinds-group", len(CASES)
    data = tmp_path / "data"
    data.mkdir()
    props = tmp_path / "broker.properties"
    props.write_text("log.segment.bytes=16384\n")
    broker = BrokerProcess(data, extra=["--config", str(props)])
    with broker:
        create_topic(broker.bootstrap, topic, partitions)
        set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
        _produce(broker.bootstrap, topic, partitions, RECORDS)
        assert broker.stop() == 0
    said: dict[int, tuple[str, str, int, int]] = {}
    kept: dict[int, set[int]] = {}
    for p, case in enumerate(CASES):
        directory = data / f"{topic}-{p}"
        assert len(_segments(directory)) >= 4, case.name
        said[p] = event, _, first, last = case.damage(directory)
        assert 0 < first <= last < RECORDS - 1, case.name
        kept[p] = set(range(RECORDS)) - set(range(first, last + 1))
    want = sum(map(len, kept.values()))

    metrics_port = free_port()
    extra = ["--config", str(props), "--metrics-port", str(metrics_port)]
    with BrokerProcess(data, port=broker.port, extra=extra) as broker:
        assert _plain_offsets(broker.bootstrap, topic, partitions, want) == kept
        assert _share_offsets(broker.bootstrap, group, topic, partitions, want) == kept
        damaged = sum(s[3] - s[2] + 1 for s in said.values() if s[0] == DAMAGE)
        missing = sum(s[3] - s[2] + 1 for s in said.values() if s[0] == GAP)
        assert _metric(metrics_port, "shoal_log_damaged_records") == damaged
        assert _metric(metrics_port, "shoal_log_missing_records") == missing
        broker.kill()
    lines = _log_events(broker)
    for p, case in enumerate(CASES):
        event, file, first, last = said[p]
        about = [e for e in lines if e.get("event") in (DAMAGE, GAP) and f"{topic}-{p}/" in str(e)]
        assert [(e["event"], e["file"], e["offsets"]) for e in about] == [
            (event, file, [first, last])
        ], case.name
    assert not [e for e in lines if e.get("exception")]  # no traceback


def test_a_damaged_share_state_batch_stops_no_reader(tmp_path: Path) -> None:
    """A share group's state (SHARE_DELTA and SHARE_CHECKPOINT control batches, written into
    the partition after the records it acknowledged) is damaged in a sealed segment. Control
    batches are not data: a plain Consumer steps over the damaged one as over any (librdkafka
    skips control batches by their attributes; a damaged header is unreadable, so it is
    served as the empty stand-in), a new share group gets every record, and the group whose
    state it was goes on, getting again only what the damaged record had acknowledged."""
    data = tmp_path / "data"
    data.mkdir()
    props = tmp_path / "broker.properties"
    props.write_text("log.segment.bytes=16384\n")
    broker = BrokerProcess(data, extra=["--config", str(props)])
    with broker:
        create_topic(broker.bootstrap, TOPIC, 1)
        for g in (GROUP, "fresh-group"):
            set_group_configs(broker.bootstrap, g, {"share.auto.offset.reset": "earliest"})
        _produce(broker.bootstrap, TOPIC, 1, RECORDS)
        assert _share_offsets(broker.bootstrap, GROUP, TOPIC, 1, RECORDS)[0] == set(range(RECORDS))
        _produce(broker.bootstrap, TOPIC, 1, RECORDS, start=RECORDS)  # seals the state
        assert broker.stop() == 0
    directory = data / f"{TOPIC}-0"
    sealed = _segments(directory)[:-1]
    path, pos, control = next((s, pos, h) for s in sealed for pos, h in _batches(s) if h.is_control)
    _set(path, pos + 70, bytes(16))  # its records: the CRC fails
    offsets = [o for s in _segments(directory) for _, h in _batches(s) if not h.is_control
               for o in range(h.base_offset, h.last_offset + 1)]  # fmt: skip
    assert len(offsets) == 2 * RECORDS

    metrics_port = free_port()
    extra = ["--config", str(props), "--metrics-port", str(metrics_port)]
    with BrokerProcess(data, port=broker.port, extra=extra) as broker:
        plain = _plain_offsets(broker.bootstrap, TOPIC, 1, 2 * RECORDS)[0]
        assert plain == set(offsets)
        fresh = _share_offsets(broker.bootstrap, "fresh-group", TOPIC, 1, 2 * RECORDS)[0]
        assert fresh == set(offsets)
        second_half = set(offsets[RECORDS:])
        again = _share_offsets(broker.bootstrap, GROUP, TOPIC, 1, second_half)[0]
        assert again >= second_half  # plus what only the damaged record had acknowledged
        assert _metric(metrics_port, "shoal_log_damaged_records") == control.record_count
        broker.kill()
    lines = _log_events(broker)
    damage = [(e["file"], e["offsets"]) for e in lines if e.get("event") == DAMAGE]
    assert damage == [(str(path), [control.base_offset, control.last_offset])]
    assert not [e for e in lines if e.get("exception")]  # no traceback
