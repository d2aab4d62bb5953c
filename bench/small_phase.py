"""Queue traffic (issue 15): small requests and end-to-end latency, beside Redis Streams.

- "small": one Producer with `linger.ms=0` sends one-record batches (records/s, broker CPU per
  record); then 4 ShareConsumers ACCEPT each record explicitly. The peer does the same on Redis
  Streams (AOF, fsync every second): one XADD per round trip; 4 consumers in one group, each
  XREADGROUP COUNT 50 and one XACK per entry. CPU is the server process's, from /proc.
- "latency": records at a fixed rate (2,000/s) for ~10 s after a warm-up, the send time in the
  value; 4 consumers acknowledging each record measure send-to-poll time: p50, p99, p99.9.
  Twice: on one partition the 4 share (the Redis peer's shape, one stream: the goal's row),
  then on a partition per consumer.

Without redis-server (or redis-py) the peer's rows are skipped with a message saying how to get
it. Register the phases by importing this module after `bench.phases` defines the registry.
"""

from __future__ import annotations

import queue
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import redis_peer
from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from bench.phases import reap
from bench.small_workers import explicit_share_worker
from bench.small_workers import paced_produce_worker
from bench.small_workers import small_produce_worker

CONSUMERS = 4
# A share group's members learn a new assignment at their next heartbeat (5 s by default,
# `group.share.heartbeat.interval.ms`), as in Kafka: while the 4 join, a partition can move
# from a member that has already delivered to one that hears of it up to 5 s later, and the
# records of that partition wait. Measuring steady-state latency, the warm-up runs one
# heartbeat interval past the moment every consumer has delivered (without it, 2 of 5 runs
# of a partition per consumer had a p99 of ~4.5 s).
SHARE_SETTLE_S = 5.5
REDIS_GROUP = "bench"


class _Consumers:
    """`CONSUMERS` consumer processes of one group and what they reported.

    Each target is called as `(index, *args, barrier, done, out, latency)`."""

    def __init__(self, b: Bench, target: Callable[..., None], args: tuple[Any, ...], latency: bool):
        self.barrier = b.mp.Barrier(CONSUMERS + 1)
        self.done = b.mp.Event()
        self.out = b.mp.Queue()
        self.procs = [
            b.mp.Process(
                target=target,
                args=(i, *args, self.barrier, self.done, self.out, latency),
                daemon=True,
            )
            for i in range(CONSUMERS)
        ]
        self.delivered = [0] * CONSUMERS
        self.measured = [0] * CONSUMERS
        self.ends: dict[int, dict[str, Any]] = {}
        self.first_at: float | None = None  # the first delivery: the group had formed

    def start(self) -> None:
        for p in self.procs:
            p.start()
        self.barrier.wait(60)

    def until(self, enough: Callable[[], bool], timeout: float) -> bool:
        """Take reports until `enough()`; False on timeout or a consumer's crash."""
        deadline = time.monotonic() + timeout
        while not enough():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                item = self.out.get(timeout=min(1.0, left))
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in self.procs):
                    return False
                continue
            if item[0] == "n":
                _, i, delivered, measured, at = item
                self.delivered[i] += delivered
                self.measured[i] = measured
                self.first_at = min(self.first_at or at, at)
            else:
                self.ends[item[1]] = item[2]
        return True

    def finish(self) -> None:
        """Stop them: each sends its last acknowledgements and reports."""
        self.done.set()
        self.until(lambda: len(self.ends) == CONSUMERS, 60)
        reap(self.procs)

    def acked_at(self) -> float:
        return max((e["acked"] for e in self.ends.values()), default=time.monotonic())

    def latencies(self) -> list[float]:
        out = array("d")
        for end in self.ends.values():
            out.frombytes(end["latencies"])
        return sorted(out)

    def notes(self, expected: int, start: float) -> str:
        notes = []
        if self.first_at is not None:
            notes.append(f"first delivery at {self.first_at - start:.2f}s")
        total = sum(self.delivered)
        if total < expected:
            notes.append(f"INCOMPLETE: {total:,} of {expected:,} delivered")
        elif total > expected:
            notes.append(f"{total - expected:,} redeliveries")
        notes.append("delivered " + "+".join(f"{n:,}" for n in self.delivered))
        errors = [e for end in self.ends.values() for e in end["errors"]]
        commit_errors = sum(end["commit_errors"] for end in self.ends.values())
        if errors or commit_errors:
            notes.append(f"errors: {errors[:3]} commit errors: {commit_errors}")
        return "; ".join(notes)


@dataclass
class _Side:
    """One system under test: Shoal, or the Redis Streams peer."""

    name: str  # key prefix: "" for Shoal, "redis-" for the peer
    cpu: Callable[[], float]
    produce: Callable[..., None]  # (conn, *produce_args, records, value_size)
    produce_args: tuple[Any, ...]
    paced: Callable[..., None]  # (conn, *paced_args, rate, seconds, value_size)
    paced_args: tuple[Any, ...]
    consume: Callable[..., None]  # (index, *consume_args, barrier, done, out, latency)
    consume_args: tuple[Any, ...]
    # Warm-up after every consumer's first delivery, before measuring: see `SHARE_SETTLE_S`.
    settle_s: float = 0.0
    # Fetch requests handled so far (Shoal's ShareFetches), None where not counted.
    fetches: Callable[[], float | None] = lambda: None


def _small(b: Bench, side: _Side, what: str) -> list[Row]:
    """One-record produce requests, then 4 consumers acknowledging each record."""
    records = b.small_records
    result, cpu = b.run_worker(
        side.produce,
        *side.produce_args,
        records,
        b.value_size,
        profile=None if side.name else "small-produce",
        cpu_of=side.cpu,
    )
    if result["unflushed"] or result["errors"]:
        raise RuntimeError(f"{side.name}small produce failed: {result}")
    produced = Row(
        key=f"{side.name}small-produce",
        label=what.split(";")[0],
        records=records,
        seconds=result["end"] - result["start"],
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note=_client_logs(result),
        peer=bool(side.name),
    )
    consumers = _Consumers(b, side.consume, side.consume_args, latency=False)
    consumers.start()
    if not side.name:
        b.broker.profile_start()
    # CPU from the release (joining costs the broker little); the rate from the first delivery
    start = time.monotonic()
    cpu0 = side.cpu()
    consumers.until(lambda: sum(consumers.delivered) >= records, 300)
    consumers.finish()
    cpu = side.cpu() - cpu0
    if not side.name:
        b.broker.profile_stop("small-consume")
    consumed = Row(
        key=f"{side.name}small-consume",
        label=what.split(";")[1].strip(),
        records=min(records, sum(consumers.delivered)),
        seconds=consumers.acked_at() - (consumers.first_at or start),
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note="timed from the " + consumers.notes(records, start),
        peer=bool(side.name),
    )
    return [produced, consumed]


def _live(b: Bench, side: _Side, label: str) -> Row:
    """Queue traffic as it flows: the producer at full speed while the 4 consumers take and
    acknowledge; each request then carries few records. Timed and CPU from "go" to the last
    acknowledgement."""
    records = b.small_records
    consumers = _Consumers(b, side.consume, side.consume_args, latency=False)
    consumers.start()
    parent, child = b.mp.Pipe()
    args = (child, *side.produce_args, records, b.value_size)
    producer = b.mp.Process(target=side.produce, args=args, daemon=True)
    producer.start()
    try:
        if not parent.poll(60) or parent.recv() != "ready":
            raise RuntimeError(f"{side.produce.__name__} did not get ready")
        if not side.name:
            b.broker.profile_start()
        start = time.monotonic()
        cpu0 = side.cpu()
        parent.send("go")
        consumers.until(lambda: sum(consumers.delivered) >= records, 300)
        result: dict[str, Any] = parent.recv() if parent.poll(120) else {}
    finally:
        consumers.finish()
        producer.join(30)
        if producer.is_alive():
            producer.kill()
    cpu = side.cpu() - cpu0
    if not side.name:
        b.broker.profile_stop("small-live")
    notes = [consumers.notes(records, start)]
    if result:
        rate = records / (result["end"] - result["start"])
        notes.insert(0, f"produce alone {rate:,.0f} records/s")
        notes.append(_client_logs(result))
    return Row(
        key=f"{side.name}small-live",
        label=label,
        records=min(records, sum(consumers.delivered)),
        seconds=consumers.acked_at() - start,
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note="; ".join(n for n in notes if n),
        peer=bool(side.name),
    )


def _client_logs(result: dict[str, Any]) -> str:
    logs = result.get("client_logs") or []
    return f"producer's librdkafka warnings: {' | '.join(logs)}" if logs else ""


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _latency(b: Bench, side: _Side, label: str, key: str = "latency") -> Row:
    """Paced records through 4 consumers: warm up until each consumer got one (or 20 s), then
    measure `latency_seconds` at `latency_rate`."""
    consumers = _Consumers(b, side.consume, side.consume_args, latency=True)
    consumers.start()
    parent, child = b.mp.Pipe()
    args = (child, *side.paced_args, b.latency_rate, b.latency_seconds, b.value_size)
    producer = b.mp.Process(target=side.paced, args=args, daemon=True)
    producer.start()
    try:
        if not parent.poll(60) or parent.recv() != "ready":
            raise RuntimeError(f"{side.paced.__name__} did not get ready")
        parent.send("go")
        consumers.until(lambda: all(consumers.delivered), 20)
        consumers.until(lambda: False, side.settle_s)  # keeps taking the warm-up's reports
        if not side.name:
            b.broker.profile_start()
        cpu0, fetches0 = side.cpu(), side.fetches()
        parent.send("measure")
        if not parent.poll(b.latency_seconds + 120):
            raise RuntimeError(f"{side.paced.__name__} did not finish")
        result: dict[str, Any] = parent.recv()
        expected = result["measured"]
        consumers.until(lambda: sum(consumers.measured) >= expected, 30)
        cpu, fetches1 = side.cpu() - cpu0, side.fetches()
        if not side.name:
            b.broker.profile_stop(key)
    finally:
        consumers.finish()
        producer.join(30)
        if producer.is_alive():
            producer.kill()
    ordered = consumers.latencies()
    p50, p99, p999 = (_percentile(ordered, q) for q in (0.5, 0.99, 0.999))
    fetches = None if fetches0 is None or fetches1 is None else fetches1 - fetches0
    notes = _latency_notes(ordered, expected, result, fetches, cpu)
    return Row(
        key=f"{side.name}{key}",
        label=label,
        records=len(ordered),
        seconds=result["end"] - result["start"],
        broker_cpu_s=cpu,
        value_bytes=b.value_size,
        note="; ".join(notes) if ordered else "no measured record received",
        latency_ms=(p50, p99, p999),
        peer=bool(side.name),
    )


def _latency_notes(
    ordered: list[float],
    expected: int,
    result: dict[str, Any],
    fetches: float | None,
    cpu: float,
) -> list[str]:
    p50, p99, p999 = (_percentile(ordered, q) for q in (0.5, 0.99, 0.999))
    notes = [f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, p99.9 {p999:.2f} ms, max {ordered[-1]:.1f}"]
    if len(ordered) < expected:
        notes.append(f"INCOMPLETE: {len(ordered):,} of {expected:,} measured records received")
    if fetches is not None and ordered:
        notes.append(_per_fetch(fetches, len(ordered), cpu))
    if result["lag_ns"] > 5_000_000:
        notes.append(f"producer fell behind by up to {result['lag_ns'] / 1e6:.0f} ms")
    if result["errors"]:
        notes.append(f"produce errors: {result['errors'][:3]}")
    if result.get("client_logs"):
        notes.append(_client_logs(result))
    return notes


def _per_fetch(fetches: float, records: int, cpu: float) -> str:
    """At a fixed rate the broker's CPU per record is (fetches per record) x (CPU per fetch):
    a busy broker answers fewer fetches, with more records each."""
    per_fetch = f"{cpu / fetches * 1e6:.0f}" if fetches else "-"
    return (
        f"{fetches / records:.2f} ShareFetch/record, "
        f"{per_fetch} µs broker CPU per ShareFetch (all its CPU / ShareFetches)"
    )


def _shoal(b: Bench, topic: str, partitions: int | None = None) -> _Side:
    partitions = partitions or b.partitions
    b.create_topic(topic, partitions)
    group = f"bench-{topic}"
    b.set_group_config(group, "share.auto.offset.reset", "earliest")
    bootstrap = b.broker.bootstrap
    return _Side(
        name="",
        cpu=b.broker.cpu_seconds,
        produce=small_produce_worker,
        produce_args=(bootstrap, topic, partitions),
        paced=paced_produce_worker,
        paced_args=(bootstrap, topic, partitions),
        consume=explicit_share_worker,
        consume_args=(bootstrap, group, topic),
        settle_s=SHARE_SETTLE_S,
        fetches=lambda: b.broker.requests_handled("ShareFetch"),
    )


def _redis(server: redis_peer.RedisServer, stream: str) -> _Side:
    from bench import redis_workers  # needs redis-py, checked by redis_peer.missing()

    client = redis_workers._client(server.port)
    client.xgroup_create(stream, REDIS_GROUP, id="0", mkstream=True)
    client.close()
    port = server.port
    return _Side(
        name="redis-",
        cpu=server.cpu_seconds,
        produce=redis_workers.xadd_worker,
        produce_args=(port, stream),
        paced=redis_workers.paced_xadd_worker,
        paced_args=(port, stream),
        consume=redis_workers.xreadgroup_worker,
        consume_args=(port, REDIS_GROUP, stream),
    )


def _with_redis(run: Callable[[redis_peer.RedisServer], list[Row]]) -> list[Row]:
    """The peer's rows, from a fresh redis-server; none (and a message) if it cannot run."""
    why = redis_peer.missing()
    if why is not None:
        print(f"  skipping the Redis Streams peer: {why}", flush=True)
        return []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-redis-") as tmp:
        server = redis_peer.RedisServer(Path(tmp))
        try:
            server.start()
        except (OSError, RuntimeError) as e:  # TimeoutError is an OSError
            server.stop()
            print(f"  skipping the Redis Streams peer: it did not start: {e}", flush=True)
            return []
        try:
            return run(server)
        finally:
            server.stop()


@phase("small", "one-record produce batches, 4 ShareConsumers with explicit acks; Redis peer")
def small_phase(b: Bench) -> list[Row]:
    n = b.partitions
    stamp = time.time_ns()
    rows = _small(
        b,
        _shoal(b, f"bench-small-{stamp}"),
        f"produce 1-record batches, linger.ms=0, {n} partitions;"
        f" share, {CONSUMERS} ShareConsumers, explicit ACCEPT each",
    )
    rows.append(
        _live(
            b,
            _shoal(b, f"bench-small-live-{stamp}"),
            f"live: the produce and the {CONSUMERS} ShareConsumers at once",
        )
    )
    peer = "Redis Streams (AOF everysec): "

    def redis_rows(server: redis_peer.RedisServer) -> list[Row]:
        what = (
            f"{peer}XADD, one per round trip;"
            f"{peer}{CONSUMERS} consumers, XREADGROUP COUNT 50, XACK each"
        )
        live = f"{peer}live: XADD and the {CONSUMERS} consumers at once"
        return [
            *_small(b, _redis(server, "bench-small"), what),
            _live(b, _redis(server, "bench-small-live"), live),
        ]

    return rows + _with_redis(redis_rows)


@phase("latency", "end-to-end latency at a fixed rate, 4 consumers acking each; Redis peer")
def latency_phase(b: Bench) -> list[Row]:
    rate = f"{b.latency_rate:,} records/s"
    stamp = time.time_ns()
    # The peer's shape: one Redis stream read by the 4 consumers of a group, so any idle one
    # takes the next entry. In Shoal that is one partition shared by the 4 share consumers;
    # with one partition per consumer (as the simple assignor gives 4 members of 4
    # partitions) a record waits for its one consumer's next ShareFetch.
    shared = _latency(
        b,
        _shoal(b, f"bench-latency-shared-{stamp}", 1),
        f"latency at {rate}, 1 partition, {CONSUMERS} ShareConsumers, explicit ACCEPT",
        key="latency-shared",
    )
    spread = _latency(
        b,
        _shoal(b, f"bench-latency-{stamp}"),
        f"latency at {rate}, {b.partitions} partitions, {CONSUMERS} ShareConsumers, explicit"
        " ACCEPT",
    )
    peer = f"Redis Streams latency at {rate}, 1 stream, {CONSUMERS} consumers, XACK each"
    return [
        shared,
        spread,
        *_with_redis(lambda server: [_latency(b, _redis(server, "bench-latency"), peer)]),
    ]
