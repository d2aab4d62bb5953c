"""The "processes" phase: broker CPU per record with `shoal serve --processes 2` against one
process, on the same traffic in the same run (issue 33, docs/multicore.md).

Each side gets its own broker set in a fresh data dir: one-record produce requests
(`linger.ms=0`), then 4 ShareConsumers ACCEPTing each record, as the "small" phase drives the
main broker. Broker CPU is the user + system time of every broker process of the set (and of
the supervisor, which polls its children), from "go" to the end. On a machine whose cores the
clients already fill this cannot show throughput scaling; it shows what splitting the work
over processes costs per record.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient

from bench import security
from bench.broker import BrokerProcess
from bench.broker import free_ports
from bench.broker import listens
from bench.broker import process_cpu_seconds
from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from bench.small_phase import CONSUMERS
from bench.small_phase import SHARE_SETTLE_S
from bench.small_phase import _Side
from bench.small_phase import _small
from bench.small_workers import explicit_share_worker
from bench.small_workers import paced_produce_worker
from bench.small_workers import small_produce_worker

SIDES = (1, 2)


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@contextmanager
def _broker_set(processes: int) -> Iterator[BrokerProcess]:
    """`shoal serve --processes N` (its supervisor) in a fresh data dir, every node up."""
    tmp = Path(tempfile.mkdtemp(prefix=f"shoal-bench-n{processes}-"))
    broker = BrokerProcess(
        tmp / "data", free_ports(processes), ["--processes", str(processes)], log_level="warning"
    )
    try:
        broker.start()
        deadline = time.monotonic() + 120
        while not all(listens(broker.port + node) for node in range(processes)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"not {processes} broker processes:\n{broker.log()}")
            time.sleep(0.1)
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _cpu(broker: BrokerProcess) -> float:
    """The set's CPU seconds: the process started, and its children (the N brokers)."""
    pids = [broker.pid, *_children(broker.pid)]
    return sum(process_cpu_seconds(pid) for pid in pids)


def _side(b: Bench, broker: BrokerProcess, processes: int) -> _Side:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **security.client_settings()})
    topic, group = "bench-processes", "bench-processes"
    main_admin, b.admin = b.admin, admin  # create_topic / set_group_config use b.admin
    try:
        b.create_topic(topic, b.partitions)
        b.set_group_config(group, "share.auto.offset.reset", "earliest")
    finally:
        b.admin = main_admin
    bootstrap = broker.bootstrap
    return _Side(
        name=f"n{processes}-",
        cpu=lambda: _cpu(broker),
        produce=small_produce_worker,
        produce_args=(bootstrap, topic, b.partitions),
        paced=paced_produce_worker,
        paced_args=(bootstrap, topic, b.partitions),
        consume=explicit_share_worker,
        consume_args=(bootstrap, group, topic),
        settle_s=SHARE_SETTLE_S,
    )


@phase("processes", "broker CPU per record, --processes 2 against 1, small produce + share")
def processes_phase(b: Bench) -> list[Row]:
    rows: list[Row] = []
    for n in SIDES:
        with _broker_set(n) as broker:
            what = (
                f"--processes {n}: produce 1-record batches, {b.partitions} partitions;"
                f"--processes {n}: {CONSUMERS} ShareConsumers, explicit ACCEPT each"
            )
            rows += _small(b, _side(b, broker, n), what)
    return rows
