"""Key-ordered sharing (share.key.ordering.enable) with confluent-kafka's ShareConsumer.

Four explicit-mode consumer processes share one partition holding 20 keys, and RELEASE 5% of
the records on their first delivery. From their logs: no two consumers ever hold records of
one key at overlapping times, every key's ACCEPTs come in offset order, a released record is
delivered again before the next record of its key, and every record is accepted once. The
same rule holds across kill -9 of the broker.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import set_group_configs
from tests.compat.support import start_broker
from tests.compat.support import wait_for_share_members

pytestmark = pytest.mark.compat

KEYS = 20
RELEASE_EVERY = 20  # offsets divisible by this are RELEASEd on first delivery: 5%


@dataclass(frozen=True)
class Row:
    kind: str  # D, A or C (see keyed_share_worker)
    key: str
    offset: int
    detail: str  # delivery count (D) or acknowledge type (A, C)
    t: float
    worker: int


def start_worker(bootstrap: str, group: str, topic: str, out: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "tests.compat.keyed_share_worker",
        bootstrap, group, topic, str(out), str(RELEASE_EVERY),
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def rows_of(out: Path, worker: int) -> list[Row]:
    rows = []
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5:  # a line cut by a kill is left out
            kind, key, offset, detail, t = parts
            rows.append(Row(kind, key, int(offset), detail, float(t), worker))
    return rows


def produce_keyed(bootstrap: str, topic: str, count: int) -> None:
    """`count` records, keys k00..k19 in turn."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **QUIET})
    for i in range(count):
        p.produce(topic, key=b"k%02d" % (i % KEYS), value=b"%d" % i)
    assert p.flush(20) == 0


def setup_group(bootstrap: str, topic: str, group: str) -> None:
    create_topic(bootstrap, topic, 1)
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.key.ordering.enable": "true"},
    )
    assert describe_group_configs(bootstrap, group)["share.key.ordering.enable"] == "true"


def holds(rows: list[Row]) -> list[tuple[str, int, float, float, int]]:
    """(key, offset, start, end, worker): from a poll returning the record to its
    acknowledgement being sent. Deliveries never acknowledged (a kill) are left out."""
    start: dict[tuple[int, int], float] = {}
    out = []
    for r in sorted(rows, key=lambda r: r.t):
        if r.kind == "D":
            start[(r.worker, r.offset)] = r.t
        elif r.kind == "A" and (r.worker, r.offset) in start:
            out.append((r.key, r.offset, start.pop((r.worker, r.offset)), r.t, r.worker))
    return out


def assert_no_overlap(rows: list[Row]) -> None:
    by_key: dict[str, list[tuple[float, float, int, int]]] = defaultdict(list)
    for key, offset, t0, t1, worker in holds(rows):
        by_key[key].append((t0, t1, worker, offset))
    for key, spans in by_key.items():
        spans.sort()
        for (_, a1, aw, ao), (b0, _, bw, bo) in pairwise(spans):
            assert b0 >= a1, f"key {key}: {ao} held by {aw} until {a1}, {bo} by {bw} at {b0}"


def assert_accepts_in_offset_order(rows: list[Row]) -> None:
    by_key: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in rows:
        if r.kind == "A" and r.detail == "ACCEPT":
            by_key[r.key].append((r.t, r.offset))
    for key, accepts in by_key.items():
        offsets = [o for _, o in sorted(accepts)]
        assert offsets == sorted(offsets), f"key {key} accepted out of order: {offsets[:20]}"


def assert_released_redelivered_first(rows: list[Row]) -> None:
    """A RELEASEd record is delivered again before any later record of its key."""
    deliveries: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in rows:
        if r.kind == "D":
            deliveries[r.key].append((r.t, r.offset))
    for key, seq in deliveries.items():
        offsets = [o for _, o in sorted(seq)]
        for i, o in enumerate(offsets):
            if o % RELEASE_EVERY == 0 and o in offsets[i + 1 :]:
                again = offsets.index(o, i + 1)
                assert all(p < o for p in offsets[i + 1 : again]), (key, offsets[i : again + 1])


def test_four_consumers_keep_per_key_order_with_releases(tmp_path: Path) -> None:
    broker: BrokerProcess = start_broker(tmp_path / "data", SHORT_SESSION_CONFIG)
    topic, group, total = "keyed", "keyed-group", 2_000
    workers = []
    outs = [tmp_path / f"w{i}.txt" for i in range(4)]
    try:
        setup_group(broker.bootstrap, topic, group)
        for out in outs:
            out.touch()
            workers.append(start_worker(broker.bootstrap, group, topic, out))
        wait_for_share_members(broker.bootstrap, group, len(workers))  # before records exist
        produce_keyed(broker.bootstrap, topic, total)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            accepted = {
                r.offset
                for i, out in enumerate(outs)
                for r in rows_of(out, i)
                if r.kind == "C" and r.detail == "ACCEPT"
            }
            if len(accepted) >= total:
                break
            time.sleep(0.5)
    finally:
        for w in workers:
            w.kill()
            w.wait()
        broker.stop()
    rows = [r for i, out in enumerate(outs) for r in rows_of(out, i)]
    accepts = [r.offset for r in rows if r.kind == "C" and r.detail == "ACCEPT"]
    assert len(accepts) == len(set(accepts)) == total, "every record accepted exactly once"
    released = {r.offset for r in rows if r.kind == "C" and r.detail == "RELEASE"}
    assert released == {o for o in accepts if o % RELEASE_EVERY == 0}
    assert_released_redelivered_first(rows)
    assert_no_overlap(rows)
    assert_accepts_in_offset_order(rows)
    assert len({r.worker for r in rows if r.kind == "D"}) == 4, "the work was shared"
    # Affinity: once all four fetch, a key stays with one consumer (a few moves at the start).
    owners = {(r.key, r.worker) for r in rows if r.kind == "D" and r.offset >= total // 2}
    assert len(owners) <= KEYS + 4, sorted(owners)


def accepted_offsets(rows: list[Row]) -> set[int]:
    return {r.offset for r in rows if r.kind == "C" and r.detail == "ACCEPT"}


def run_era(
    broker: BrokerProcess, outs: list[Path], kill: bool, done_before: set[int], total: int
) -> list[Row]:
    """Two workers for one broker lifetime: until the broker is killed (kill -9), or until
    every record is accepted; their rows."""
    workers = []
    for out in outs:
        out.touch()
        workers.append(start_worker(broker.bootstrap, "keyed-crash-group", "keyed-crash", out))
    try:
        if kill:  # kill -9 mid-stream: a second after the first delivery of this lifetime
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(
                r.kind == "D" for i, o in enumerate(outs) for r in rows_of(o, i)
            ):
                time.sleep(0.1)
            time.sleep(1.0)
            broker.kill()
        else:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                rows = [r for i, o in enumerate(outs) for r in rows_of(o, i)]
                if len(done_before | accepted_offsets(rows)) >= total:
                    break
                time.sleep(0.5)
    finally:
        for w in workers:
            w.kill()
            w.wait()
    return [r for i, o in enumerate(outs) for r in rows_of(o, i)]


def test_kill_9_keeps_the_key_rule(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data, SHORT_SESSION_CONFIG)
    total, kills = 10_000, 3
    setup_group(broker.bootstrap, "keyed-crash", "keyed-crash-group")
    produce_keyed(broker.bootstrap, "keyed-crash", total)
    eras: list[list[Row]] = []  # the rows of each broker lifetime
    for era in range(kills + 1):
        outs = [tmp_path / f"e{era}-w{i}.txt" for i in range(2)]
        done = {o for rows in eras for o in accepted_offsets(rows)}
        eras.append(run_era(broker, outs, era < kills, done, total))
        if era < kills:
            broker = start_broker(data, SHORT_SESSION_CONFIG)
    broker.stop()
    for rows in eras:  # within one broker lifetime the rule holds as without kills
        assert_no_overlap(rows)
    # Confirmed ACCEPTs of a key, over every lifetime, come in offset order.
    confirmed: dict[str, list[int]] = defaultdict(list)
    for r in sorted((r for rows in eras for r in rows), key=lambda r: r.t):
        if r.kind == "C" and r.detail == "ACCEPT":
            confirmed[r.key].append(r.offset)
    for key, offsets in confirmed.items():
        assert offsets == sorted(offsets), f"key {key}: {offsets[:20]}"
    assert sum(len(v) for v in confirmed.values()) >= total * 0.99
    assert all(any(r.kind == "D" for r in rows) for rows in eras[:kills]), "kills mid-stream"
