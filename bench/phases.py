"""The benchmark's phases: a small registry, each phase returning table rows.

Add a phase with `@phase("name", "what it measures")` on a function `(Bench) -> list[Row]`; it
runs in registration order and is selectable with `--only name`. A phase that needs data made
by another (fetch reads what produce wrote) makes it itself when run alone, unmeasured.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic

from bench import workers
from bench.broker import BrokerProcess


@dataclass
class Row:
    key: str  # stable id used by the ratios, e.g. "produce", "share-4"
    label: str
    records: int
    seconds: float
    broker_cpu_s: float
    value_bytes: int
    note: str = ""
    latency_ms: tuple[float, float, float] | None = None  # p50, p99, p99.9 end to end
    peer: bool = False  # a peer's figures (e.g. Redis Streams): "broker CPU" is its server's

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_s(self) -> float:
        return self.records * self.value_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_record(self) -> float:
        return self.broker_cpu_s / self.records * 1e6 if self.records else 0.0


@dataclass
class Bench:
    """What a phase can reach: the broker, the admin client, the run's options."""

    broker: BrokerProcess
    admin: AdminClient
    records: int
    share_records: int
    partitions: int
    value_size: int
    small_records: int = 50_000  # the small-request phase
    latency_rate: int = 2_000  # records/s of the latency phase ...
    latency_seconds: float = 10.0  # ... for this long, after a warm-up
    mp: SpawnContext = field(default_factory=lambda: multiprocessing.get_context("spawn"))
    topics: dict[str, int] = field(default_factory=dict)  # topic -> records in it
    plain_topic: str | None = None  # what the last produce phase wrote, for fetch
    notes: list[str] = field(default_factory=list)

    def create_topic(self, name: str, partitions: int | None = None) -> None:
        """A topic of `partitions` (default: the run's `partitions`)."""
        futures = self.admin.create_topics(
            [NewTopic(name, num_partitions=partitions or self.partitions, replication_factor=1)],
            operation_timeout=10,
        )
        for future in futures.values():
            future.result(timeout=30)

    def set_group_config(self, group: str, name: str, value: str) -> None:
        resource = ConfigResource(
            "group",
            group,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        for future in self.admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    def run_worker(
        self,
        target: Callable[..., None],
        *args: Any,
        profile: str | None = None,
        cpu_of: Callable[[], float] | None = None,
    ) -> tuple[dict[str, Any], float]:
        """Run a handshaking worker in a child process; its result and the broker CPU seconds
        (or `cpu_of`'s, a peer server's) spent between "go" and the result."""
        cpu_seconds = cpu_of or self.broker.cpu_seconds
        parent, child = self.mp.Pipe()
        proc = self.mp.Process(target=target, args=(child, *args), daemon=True)
        proc.start()
        try:
            if not parent.poll(60) or parent.recv() != "ready":
                raise RuntimeError(f"{target.__name__} did not get ready")
            if profile:
                self.broker.profile_start()
            cpu0 = cpu_seconds()
            parent.send("go")
            if not parent.poll(600):
                raise RuntimeError(f"{target.__name__} did not finish")
            result: dict[str, Any] = parent.recv()
            cpu = cpu_seconds() - cpu0
            if profile:
                self.broker.profile_stop(profile)
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
        return result, cpu

    def produce(self, topic: str, records: int, profile: str | None = None) -> Row:
        self.create_topic(topic)
        result, cpu = self.run_worker(
            workers.produce_worker,
            self.broker.bootstrap,
            topic,
            records,
            self.partitions,
            self.value_size,
            profile=profile,
        )
        if result["unflushed"] or result["errors"]:
            raise RuntimeError(f"produce to {topic} failed: {result}")
        self.topics[topic] = records
        return Row(
            key="produce",
            label=f"produce acks=all, {self.partitions} partitions",
            records=records,
            seconds=result["end"] - result["start"],
            broker_cpu_s=cpu,
            value_bytes=self.value_size,
        )


@dataclass(frozen=True)
class Phase:
    name: str
    description: str
    run: Callable[[Bench], list[Row]]


PHASES: dict[str, Phase] = {}


def phase(name: str, description: str) -> Callable[[Callable[[Bench], list[Row]]], Any]:
    def register(run: Callable[[Bench], list[Row]]) -> Callable[[Bench], list[Row]]:
        PHASES[name] = Phase(name, description, run)
        return run

    return register


@phase("produce", "N records of V-byte values, acks=all, from one Producer")
def produce_phase(b: Bench) -> list[Row]:
    topic = f"bench-plain-{len(b.topics)}"  # a fresh topic each time
    row = b.produce(topic, b.records, profile="produce")
    b.plain_topic = topic
    return [row]


@phase("fetch", "a Consumer with manual assignment reads the produced records back")
def fetch_phase(b: Bench) -> list[Row]:
    if b.plain_topic is None:
        b.plain_topic = "bench-plain-for-fetch"
        b.produce(b.plain_topic, b.records)
    records = b.topics[b.plain_topic]
    result, cpu = b.run_worker(
        workers.fetch_worker,
        b.broker.bootstrap,
        b.plain_topic,
        records,
        b.partitions,
        profile="fetch",
    )
    note = "" if result["count"] == records else f"INCOMPLETE: {result['count']} read"
    if result["errors"]:
        note += f" errors: {result['errors'][:3]}"
    return [
        Row(
            key="fetch",
            label="fetch, Consumer assign()",
            records=result["count"],
            seconds=result["end"] - result["start"],
            broker_cpu_s=cpu,
            value_bytes=b.value_size,
            note=note.strip(),
        )
    ]


@dataclass
class _ShareProgress:
    """What the share consumers reported: distinct offsets, deliveries, end reports."""

    total: int
    seen: dict[int, bytearray] = field(default_factory=dict)  # partition -> 1 per offset seen
    distinct: int = 0
    deliveries: int = 0
    delivered_at: float | None = None
    ends: dict[int, dict[str, Any]] = field(default_factory=dict)

    def take(self, item: tuple[Any, ...]) -> None:
        if item[0] == "poll":
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
        else:
            self.ends[item[1]] = item[2]

    def notes(self, start: float) -> str:
        notes = []
        if self.distinct < self.total:
            notes.append(f"INCOMPLETE: {self.distinct} of {self.total} distinct offsets")
        if self.deliveries > self.distinct:
            notes.append(f"{self.deliveries - self.distinct} redeliveries")
        if self.delivered_at is not None:
            notes.append(f"all delivered at {self.delivered_at - start:.2f}s")
        ends = [self.ends[i] for i in sorted(self.ends)]
        notes.append(
            "acks confirmed "
            + "+".join(f"{e['acked_ok']:,}" for e in ends)
            + (f", {sum(e['ack_failed'] for e in ends):,} failed" if ends else "")
        )
        if len(ends) > 1:
            notes.append("delivered " + "+".join(f"{e['delivered']:,}" for e in ends))
        nonempty = sum(e["nonempty_polls"] for e in ends)
        if nonempty:
            notes.append(f"{self.deliveries / nonempty:,.0f} records/poll")
        errors = [e for end in self.ends.values() for e in end["errors"]]
        commit_errors = sum(end["commit_errors"] for end in self.ends.values())
        if errors or commit_errors:
            notes.append(f"errors: {errors[:3]} commit errors: {commit_errors}")
        return "; ".join(notes)


def _share_run(
    b: Bench,
    topic: str,
    consumers: int,
    poll_timeout: float = 0.02,
    group_configs: dict[str, str] | None = None,
) -> Row:
    """A new group (earliest, plus `group_configs`), `consumers` processes; timed from their
    release to the last commit_sync return after every distinct offset was delivered."""
    group = f"bench-share-{consumers}-{time.time_ns()}"
    b.set_group_config(group, "share.auto.offset.reset", "earliest")
    for name, value in (group_configs or {}).items():
        b.set_group_config(group, name, value)
    barrier = b.mp.Barrier(consumers + 1)
    done = b.mp.Event()
    out = b.mp.Queue()
    procs = [
        b.mp.Process(
            target=workers.share_worker,
            args=(i, b.broker.bootstrap, group, topic, barrier, done, out, poll_timeout),
            daemon=True,
        )
        for i in range(consumers)
    ]
    for p in procs:
        p.start()
    barrier.wait(60)
    b.broker.profile_start()
    start = time.monotonic()
    cpu0 = b.broker.cpu_seconds()
    progress = _ShareProgress(b.topics[topic])
    deadline = start + 300
    while len(progress.ends) < consumers and time.monotonic() < deadline:
        try:
            progress.take(out.get(timeout=1.0))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                break
        if progress.delivered_at is not None or time.monotonic() > deadline - 1:
            done.set()
    cpu = b.broker.cpu_seconds() - cpu0
    b.broker.profile_stop(f"share-{consumers}")
    done.set()
    reap(procs)
    acked_at = max((e["acked"] for e in progress.ends.values()), default=time.monotonic())
    return Row(
        key=f"share-{consumers}",
        label=f"share, {consumers} ShareConsumer{'s' if consumers > 1 else ''} (implicit)",
        records=progress.distinct,
        seconds=acked_at - start,
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note=progress.notes(start),
    )


@phase("share", "share groups with 1 and then 4 ShareConsumers, each in its own process")
def share_phase(b: Bench) -> list[Row]:
    topic = "bench-share"
    if topic not in b.topics:  # made once; every run uses a new group
        b.produce(topic, b.share_records)
    return [_share_run(b, topic, 1), _share_run(b, topic, 4)]


def median_rows(runs: list[list[Row]]) -> list[Row]:
    """One row per key over repeated runs: the run with the median records/s, its note
    extended with the range."""
    if len(runs) == 1:
        return runs[0]
    keys = list(dict.fromkeys(r.key for run in runs for r in run))
    out = []
    for key in keys:
        rows = sorted((r for run in runs for r in run if r.key == key), key=_median_by)
        mid = rows[len(rows) // 2]
        if mid.latency_ms is not None:  # a fixed rate: the p99 is what varies
            p99s = [r.latency_ms[1] for r in rows if r.latency_ms is not None]
            spread = f"median of {len(rows)}: p99 {p99s[0]:.2f}..{p99s[-1]:.2f} ms"
        else:
            spread = f"median of {len(rows)}: {rows[0].rate:,.0f}..{rows[-1].rate:,.0f} records/s"
        out.append(replace(mid, note="; ".join(n for n in (spread, mid.note) if n)))
    return out


def _median_by(row: Row) -> float:
    return row.latency_ms[1] if row.latency_ms is not None else row.rate


def reap(procs: Iterable[BaseProcess], timeout_s: float = 30) -> None:
    """Wait for worker processes to end; kill the ones still running after `timeout_s` each."""
    for p in procs:
        p.join(timeout_s)
        if p.is_alive():
            p.kill()
