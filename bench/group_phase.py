"""Consumer groups (issue 13): 4 subscribed Consumers read what the share phase reads.

The same topic and record count as the share phase (`bench-share`), a new group each run,
`auto.offset.reset=earliest`, each Consumer in its own process, committing after every
`consume()` batch. Rows for the classic protocol and for KIP-848 (`group.protocol=consumer`),
beside the share rows. The members join with their partitions paused until the group has
settled (one partition each), so the figures are of consuming, not of the join: the classic
protocol waits `group.initial.rebalance.delay.ms`, and a KIP-848 group reaches its target
assignment in heartbeat steps. Timed from the release to the last commit.
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue as MPQueue
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event
from queue import Queue
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Message
from confluent_kafka import TopicPartition

from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from bench.phases import reap
from bench.security import client_settings
from bench.workers import CONSUMER_SETTINGS

CONSUMERS = 4
PROTOCOLS = {"classic": "classic", "kip848": "consumer"}  # row key suffix -> group.protocol


def _ranges(messages: list[Message], errors: list[str]) -> list[list[int]]:
    """[partition, first, last] of a batch, consecutive offsets merged; errors noted."""
    ranges: list[list[int]] = []
    for m in messages:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF and len(errors) < 10:
                errors.append(str(err))
            continue
        partition, offset = m.partition(), m.offset()
        assert partition is not None and offset is not None
        last = ranges[-1] if ranges else None
        if last is not None and last[0] == partition and last[2] + 1 == offset:
            last[2] = offset
        else:
            ranges.append([partition, offset, offset])
    return ranges


def _join_paused(
    consumer: Consumer, index: int, protocol: str, topic: str, go: Event, out: Queue[Any]
) -> None:
    """Subscribe; pause what is assigned and report how many partitions are owned, until `go`."""
    owned: set[int] = set()

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        if protocol == "consumer":  # KIP-848 assigns incrementally; classic here is eager
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        if not go.is_set():
            c.pause(partitions)
        owned.update(tp.partition for tp in partitions)
        out.put(("owned", index, len(owned)))

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        owned.difference_update(tp.partition for tp in partitions)
        out.put(("owned", index, len(owned)))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not go.is_set():
        consumer.consume(num_messages=1, timeout=0.05)  # serves the rebalance callbacks
    consumer.resume(consumer.assignment())


def group_worker(
    index: int,
    bootstrap: str,
    group: str,
    protocol: str,
    topic: str,
    barrier: Barrier,
    go: Event,
    done: Event,
    out: Queue[tuple[Any, ...]],
) -> None:
    """One group member: join at the barrier (paused until `go`), then consume, report each
    batch's offset ranges and commit it asynchronously; on `done`, commit synchronously,
    close (LeaveGroup) and report."""
    settings = {**CONSUMER_SETTINGS, "auto.offset.reset": "earliest", "log_level": 3}
    if protocol == "consumer":  # KIP-848 leaves session and heartbeat times to the broker
        settings["group.protocol"] = "consumer"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **client_settings(), **settings}
    )
    consumer.list_topics(topic, timeout=10)
    barrier.wait()
    _join_paused(consumer, index, protocol, topic, go, out)
    batches = delivered = 0
    errors: list[str] = []
    while not done.is_set():
        messages = consumer.consume(num_messages=10_000, timeout=0.05)
        now = time.monotonic()
        ranges = _ranges(messages, errors)
        if ranges:
            batches += 1
            delivered += sum(last + 1 - first for _, first, last in ranges)
            consumer.commit(asynchronous=True)
            out.put(("poll", index, now, ranges))
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:  # _NO_OFFSET: the async commits already hold it all
        if e.args[0].code() != KafkaError._NO_OFFSET:
            errors.append(f"final commit: {e}")
    committed = time.monotonic()
    consumer.close()
    out.put(
        ("end", index, {"committed": committed, "batches": batches, "delivered": delivered,
                        "errors": errors})
    )  # fmt: skip


class _Progress:
    """Distinct offsets and deliveries reported by the members."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.seen: dict[int, bytearray] = {}  # partition -> 1 per offset seen
        self.distinct = self.deliveries = 0
        self.owned: dict[int, int] = {}  # member -> partitions it owns
        self.delivered_at: float | None = None
        self.ends: dict[int, dict[str, Any]] = {}

    def take(self, item: tuple[Any, ...]) -> None:
        if item[0] == "end":
            self.ends[item[1]] = item[2]
            return
        if item[0] == "owned":
            self.owned[item[1]] = item[2]
            return
        _, _, at, ranges = item
        for partition, first, last in ranges:
            marks = self.seen.setdefault(partition, bytearray())
            if len(marks) <= last:
                marks.extend(bytes(last + 1 - len(marks)))
            n = last + 1 - first
            self.deliveries += n
            self.distinct += n - marks.count(1, first, last + 1)
            marks[first : last + 1] = b"\x01" * n
        if self.delivered_at is None and self.distinct >= self.total:
            self.delivered_at = at


def _settle(
    procs: Sequence[BaseProcess], progress: _Progress, out: MPQueue[Any], partitions: int
) -> None:
    """Wait until every member owns its even share of the partitions."""
    settled = [partitions // CONSUMERS + (i < partitions % CONSUMERS) for i in range(CONSUMERS)]
    deadline = time.monotonic() + 60
    while sorted(progress.owned.values(), reverse=True) != settled:
        if time.monotonic() > deadline or any(p.exitcode is not None for p in procs):
            raise RuntimeError(f"the group did not settle: {progress.owned}")
        with contextlib.suppress(queue.Empty):
            progress.take(out.get(timeout=1.0))


def _consume(
    procs: Sequence[BaseProcess], progress: _Progress, out: MPQueue[Any], done: Event
) -> None:
    """Take the members' reports until each has sent its end; `done` once all is delivered."""
    deadline = time.monotonic() + 300
    while len(progress.ends) < CONSUMERS and time.monotonic() < deadline:
        try:
            progress.take(out.get(timeout=1.0))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
        if progress.delivered_at is not None or time.monotonic() > deadline - 1:
            done.set()


def _notes(progress: _Progress, settle_s: float) -> str:
    ends = [progress.ends[i] for i in sorted(progress.ends)]
    notes = [f"settled {settle_s:.2f}s after subscribe (not timed)"]
    if progress.distinct < progress.total:
        notes.append(f"INCOMPLETE: {progress.distinct} of {progress.total} distinct offsets")
    if progress.deliveries > progress.distinct:
        notes.append(f"{progress.deliveries - progress.distinct} redeliveries")
    notes.append("delivered " + "+".join(f"{e['delivered']:,}" for e in ends))
    batches = sum(e["batches"] for e in ends)
    if batches:
        notes.append(f"{progress.deliveries / batches:,.0f} records/commit")
    errors = [e for end in ends for e in end["errors"]]
    if errors:
        notes.append(f"errors: {errors[:3]}")
    return "; ".join(notes)


def _group_run(b: Bench, topic: str, key: str, protocol: str) -> Row:
    group = f"bench-group-{key}-{time.time_ns()}"
    barrier = b.mp.Barrier(CONSUMERS + 1)
    go, done, out = b.mp.Event(), b.mp.Event(), b.mp.Queue()
    procs = [
        b.mp.Process(
            target=group_worker,
            args=(i, b.broker.bootstrap, group, protocol, topic, barrier, go, done, out),
            daemon=True,
        )
        for i in range(CONSUMERS)
    ]
    for p in procs:
        p.start()
    progress = _Progress(b.topics[topic])
    try:
        barrier.wait(60)
        joined = time.monotonic()
        _settle(procs, progress, out, b.partitions)
        b.broker.profile_start()
        start = time.monotonic()
        cpu0 = b.broker.cpu_seconds()
        go.set()
        _consume(procs, progress, out, done)
        cpu = b.broker.cpu_seconds() - cpu0
        b.broker.profile_stop(f"group-{key}")
    finally:
        done.set()
        reap(procs)
    committed = max((e["committed"] for e in progress.ends.values()), default=time.monotonic())
    return Row(
        key=f"group-{CONSUMERS}-{key}",
        label=f"consumer group, {CONSUMERS} Consumers subscribe(), {protocol} protocol",
        records=progress.distinct,
        seconds=committed - start,
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note=_notes(progress, start - joined),
    )


@phase("group", "consumer groups: 4 subscribed Consumers (classic, then KIP-848) on the share data")
def group_phase(b: Bench) -> list[Row]:
    topic = "bench-share"  # what the share phase reads; made here when run alone
    if topic not in b.topics:
        b.produce(topic, b.share_records)
    return [_group_run(b, topic, key, protocol) for key, protocol in PROTOCOLS.items()]
