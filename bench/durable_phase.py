"""Durable share state (issue 4): its cost in bytes and throughput, and recovery time.

- Share throughput of 4 ShareConsumers with SHARE_CHECKPOINT/SHARE_DELTA records written,
  beside a second broker with no persister (`group.share.persister.class.name=`), same run.
- Control-record bytes written per acknowledged record, counted from the segment files'
  batch headers.
- Recovery of one share-partition, in process: a long delta chain with 2,000 records in flight.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench.broker import BrokerProcess
from bench.phases import Bench
from bench.phases import Row
from bench.phases import _share_run
from bench.phases import phase
from broker import logs
from broker.share.limits import ShareLimits
from broker.share.persister import change_of
from broker.share.persister import load
from broker.share.plans import Plan
from broker.share.share_partition import SharePartition
from broker.share.share_state_persister import ShareStatePersister
from broker.share.window import BatchSpan
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from storage.memory_log import MemoryLogs
from storage.segment_log import SegmentLog

IN_FLIGHT, DELTAS = 2000, 1000


def control_bytes(data_dir: Path, topic: str) -> int:
    """Bytes of control batches in a topic's segment files (headers only are read)."""
    total = 0
    for segment in data_dir.glob(f"{topic}-*/*.log"):
        total += sum(h.size for _, h in iter_batch_headers(segment.read_bytes()) if h.is_control)
    return total


def recovery_seconds(directory: Path) -> float:
    logs.configure("warning")  # recovery logs a line each time
    """Median time to recover a share-partition with a DELTAS-long chain and IN_FLIGHT
    records in flight, from a reopened log."""
    limits = ShareLimits(
        delivery_count_limit=5, max_record_locks=10_000, lock_duration_ms=30_000, renew_enabled=True
    )
    plog = SegmentLog.open(directory)
    for _ in range((IN_FLIGHT + DELTAS) // 100):
        plog.append(build_batch([(None, b"x" * 100)] * 100, timestamp_ms=1), now_ms=1)
    sp = SharePartition("g", uuid.uuid4(), 0, start_offset=0, limits=lambda: limits)
    topic = MemoryLogs()
    topic.create_topic("t", topic_id=sp.topic_id, logs=[plog])
    persister = ShareStatePersister(topic, max_deltas=DELTAS + 1)
    load(persister, sp, 0, 0)
    end = IN_FLIGHT + DELTAS
    sp.acquire(
        "m", [BatchSpan(b, b + 99, False) for b in range(0, end, 100)], max_records=end, now_ms=1
    )
    for i in range(DELTAS):  # every other record of the first 2,000: a delta each, many ranges
        plan = sp.plan_acknowledge("m", [(2 * i, 2 * i, [1])])
        assert isinstance(plan, Plan)
        persister.write(sp.key, change_of(sp, plan.changes), 2)
        sp.apply(plan, now_ms=2)
    plog.close()
    times = []
    for _ in range(5):
        reopened = SegmentLog.open(directory)
        started = time.perf_counter()
        fresh = SharePartition("g", sp.topic_id, 0, start_offset=0, limits=lambda: limits)
        topic = MemoryLogs()
        topic.create_topic("t", topic_id=sp.topic_id, logs=[reopened])
        load(ShareStatePersister(topic), fresh, 0, 3)
        times.append(time.perf_counter() - started)
        # The recorded window ends after the last delta: offsets 1..1998, 1,000 acknowledged.
        assert fresh.spso == 1 and fresh.speo == 2 * DELTAS - 1
        reopened.close()
    return statistics.median(times)


@phase("durable", "durable share state: control bytes/acked record, throughput on vs off, recovery")
def durable_phase(b: Bench) -> list[Row]:
    topic = "bench-durable"
    if topic not in b.topics:
        b.produce(topic, b.share_records)
    on = _share_run(b, topic, 4)
    written = control_bytes(b.broker.data_dir, topic)
    on = replace(
        on,
        key="share-4-durable",
        label="share, 4 consumers, durable state on",
        note=f"{written / on.records:.3f} control bytes per acknowledged record; {on.note}",
    )
    with tempfile.TemporaryDirectory(prefix="shoal-bench-volatile-") as tmp:
        volatile = BrokerProcess(
            Path(tmp) / "data",
            env={"SHOAL_GROUP_SHARE_PERSISTER_CLASS_NAME": ""},
            log_level="warning",
        )
        volatile.start()
        try:
            admin = AdminClient({"bootstrap.servers": volatile.bootstrap})
            vb = replace(b, broker=volatile, admin=admin, topics={})
            vb.produce(topic, b.share_records)
            off = replace(
                _share_run(vb, topic, 4),
                key="share-4-volatile",
                label="share, 4 consumers, durable state off",
            )
        finally:
            volatile.stop()
        seconds = recovery_seconds(Path(tmp) / "recovery")
    recovery = Row(
        key="recovery",
        label=f"recover 1 share-partition ({DELTAS} deltas, {IN_FLIGHT} in flight)",
        records=IN_FLIGHT,
        seconds=seconds,
        broker_cpu_s=seconds,
        value_bytes=0,
        note=f"{seconds * 1000:.1f} ms (median of 5, in process)",
    )
    return [on, off, recovery]
