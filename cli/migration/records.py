"""Copying a partition's records to the target, in order, with the offset map kept durably.

confluent-kafka (librdkafka) does the moving: a `Consumer` reads the source with
`isolation.level=read_committed` (control records and aborted transactions never reach us),
an idempotent `Producer` writes the target, compressed, in batches. Each record is decoded
once here (the target assigns new offsets and re-batches), but nothing is held beyond the
producer's bounded queue.

The map: delivery reports of one partition come back in the order produced (librdkafka keeps
it per partition; idempotence means no retry reorders or duplicates), so each report pairs the
oldest source offset still waiting with the target offset the broker gave it. Checkpoints
append what was paired to the partition's map file.

Resume (`reconcile`): records the target holds beyond the map (produced, but the process
stopped before its checkpoint) are the source's next records after the map, in order; they are
read from both sides, checked equal (key and value) and added to the map, so the copy goes on
after them and nothing is produced twice.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from cli.migration.offset_map import MapFile

CHECKPOINT_S = 1.0
POLL_BATCH = 1000


class CopyError(Exception):
    """The copy cannot go on (a refused produce, a target that does not match the map)."""


def _client_libs() -> Any:
    try:
        import confluent_kafka
    except ImportError as e:  # an optional dependency: `pip install 'shoal[migrate]'`
        raise CopyError("shoal migrate needs confluent-kafka: pip install 'shoal[migrate]'") from e
    return confluent_kafka


@dataclass
class PartitionCopy:
    """One partition to copy: from where (the map's end, or the log start) up to `end`."""

    topic: str
    partition: int
    start: int
    end: int  # the source's high watermark when the copy began
    map_file: MapFile
    copied: int = 0
    waiting: deque[int] = field(default_factory=deque)  # source offsets produced, not reported

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass
class CopyOutcome:
    records: int = 0
    bytes: int = 0
    stopped_early: bool = False  # --max-records reached


def consumer_config(props: dict[str, str], bootstrap: str) -> dict[str, Any]:
    return {
        **props,
        "bootstrap.servers": bootstrap,
        "group.id": "shoal-migrate",  # never joined nor committed: partitions are assigned
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    }


def producer_config(props: dict[str, str], bootstrap: str, compression: str) -> dict[str, Any]:
    return {
        **props,
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": compression,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 100_000,
    }


def high_watermark(consumer: Any, topic: str, partition: int) -> int:
    ck = _client_libs()
    _, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=30)
    return int(high)


def copy_records(
    src: dict[str, Any],
    dst: dict[str, Any],
    parts: list[PartitionCopy],
    on_progress: Callable[[int, int], None],
    max_records: int | None = None,
) -> CopyOutcome:
    """Copy every partition from its start to its end; checkpoint the maps as it goes."""
    ck = _client_libs()
    todo = {p.key: p for p in parts if p.start < p.end}
    outcome = CopyOutcome()
    if not todo:
        return outcome
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        part = todo_all[(msg.topic(), msg.partition())]
        source_offset = part.waiting.popleft()
        if err is not None:
            errors.append(f"{part.topic}-{part.partition} offset {source_offset}: {err}")
            return
        part.map_file.map.add_run(source_offset, msg.offset(), 1)
        part.copied += 1

    todo_all = dict(todo)
    consumer = ck.Consumer(src)
    producer = ck.Producer({**dst, "on_delivery": delivered})
    try:
        consumer.assign([ck.TopicPartition(t, p, todo[(t, p)].start) for t, p in todo])
        last_checkpoint = time.monotonic()
        while todo and not errors:
            for m in consumer.consume(POLL_BATCH, timeout=0.5):
                if _handle(ck, m, todo, producer, outcome):
                    consumer.pause([ck.TopicPartition(m.topic(), m.partition())])
                if max_records is not None and outcome.records >= max_records:
                    outcome.stopped_early = True
                    todo.clear()
                    break
            producer.poll(0)
            on_progress(outcome.records, outcome.bytes)
            if time.monotonic() - last_checkpoint >= CHECKPOINT_S:
                _checkpoint(parts)
                last_checkpoint = time.monotonic()
        producer.flush()
    finally:
        _checkpoint(parts)  # whatever was reported, even when stopping on an error
        consumer.close()
    if errors:
        raise CopyError(f"the target refused records: {errors[0]}")
    return outcome


def _handle(
    ck: Any, m: Any, todo: dict[tuple[str, int], PartitionCopy], producer: Any, out: CopyOutcome
) -> bool:
    """Produce one consumed message; True when its partition is done."""
    key = (m.topic(), m.partition())
    part = todo.get(key)
    if part is None:
        return False
    err = m.error()
    if err is not None:
        if err.code() == ck.KafkaError._PARTITION_EOF:
            del todo[key]
            return True
        raise CopyError(f"reading {key[0]}-{key[1]}: {err}")
    offset = m.offset()
    if offset >= part.end:
        del todo[key]
        return True
    ts_type, ts = m.timestamp()
    value, k, headers = m.value(), m.key(), m.headers()
    part.waiting.append(offset)
    while True:
        try:
            producer.produce(
                part.topic,
                value=value,
                key=k,
                partition=part.partition,
                headers=headers,
                timestamp=ts if ts_type != ck.TIMESTAMP_NOT_AVAILABLE else 0,
            )
            break
        except BufferError:  # the bounded queue is full: let deliveries drain it
            producer.poll(0.05)
    out.records += 1
    out.bytes += len(value or b"") + len(k or b"") + sum(len(h[1] or b"") for h in headers or ())
    if offset >= part.end - 1:
        del todo[key]
        return True
    return False


def _checkpoint(parts: list[PartitionCopy]) -> None:
    for p in parts:
        p.map_file.checkpoint()


def reconcile(
    src: dict[str, Any],
    dst: dict[str, Any],
    part_topic: str,
    partition: int,
    map_file: MapFile,
    source_start: int,
) -> int:
    """Add to the map the records the target holds beyond it; how many there were.

    `source_start`: where the source's copy began (its log start) when the map is empty.

    :raises CopyError: the target's extra records are not the source's next ones.
    """
    ck = _client_libs()
    nxt_tgt = map_file.map.next_target or 0
    nxt_src = map_file.map.next_source
    nxt_src = source_start if nxt_src is None else nxt_src
    target = ck.Consumer(dst)
    try:
        high = high_watermark(target, part_topic, partition)
        if high <= nxt_tgt:
            return 0
        extra = _read(ck, target, part_topic, partition, nxt_tgt, lambda o, n: o >= high - 1)
    finally:
        target.close()
    if not extra:
        return 0  # only control records (share state of a group on the target)
    source = ck.Consumer(src)
    try:
        theirs = _read(ck, source, part_topic, partition, nxt_src, lambda o, n: n >= len(extra))
    finally:
        source.close()
    for (t_off, t_key, t_val), (s_off, s_key, s_val) in zip(extra, theirs, strict=False):
        if (t_key, t_val) != (s_key, s_val):
            raise CopyError(
                f"{part_topic}-{partition}: target offset {t_off} does not hold source offset "
                f"{s_off}: the target changed since the copy stopped; start a new migration"
            )
        map_file.map.add_run(s_off, t_off, 1)
    if len(theirs) < len(extra):
        raise CopyError(f"{part_topic}-{partition}: the target holds more than the source")
    map_file.checkpoint()
    return len(extra)


def _read(
    ck: Any, consumer: Any, topic: str, partition: int, start: int, last: Callable[[int, int], bool]
) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of data records from `start` until `last(offset, count)` or EOF."""
    consumer.assign([ck.TopicPartition(topic, partition, start)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    while True:
        for m in consumer.consume(POLL_BATCH, timeout=0.5):
            err = m.error()
            if err is not None:
                if err.code() == ck.KafkaError._PARTITION_EOF:
                    return out
                raise CopyError(f"reading {topic}-{partition}: {err}")
            out.append((m.offset(), m.key(), m.value()))
            if last(m.offset(), len(out)):
                return out
