"""Durable share state under kill -9 (issue 4), with confluent-kafka's real clients.

A share consumer process accepts and commits records while the broker is killed with SIGKILL
at random moments and restarted, several times. Afterwards: no record whose acknowledgement
was confirmed to the client is delivered again, no produced record is lost, and records that
were delivered but not confirmed are delivered again.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.compat.support import create_topic
from tests.compat.support import set_group_configs
from tests.compat.support import share_worker_rows
from tests.compat.support import start_broker
from tests.compat.support import start_share_worker

pytestmark = pytest.mark.compat

TOPIC, GROUP, RECORDS, PARTITIONS, KILLS = "crash", "crash-group", 15_000, 2, 4
CONFIG = {"log.flush.interval.ms": 1000}  # the default policy: fsync on an interval


def test_kill_9_at_random_moments_loses_no_confirmed_acknowledgement(tmp_path: Path) -> None:
    rng = random.Random(932)
    data = tmp_path / "data"
    broker = start_broker(data, CONFIG)
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    set_group_configs(broker.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0}
    )
    # Small batches, so the consumer takes many steps and the kills land between them.
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        if i % 50 == 0:
            producer.flush(10)
    assert producer.flush(10) == 0
    del producer

    cycles: list[list[tuple[str, int, int]]] = []
    for cycle in range(KILLS + 1):
        out = tmp_path / f"cycle-{cycle}.txt"
        out.touch()
        worker = start_share_worker(broker.bootstrap, GROUP, TOPIC, out)
        try:
            if cycle < KILLS:
                time.sleep(rng.uniform(1.5, 3.0))
                broker.kill()  # kill -9 the broker mid-stream
                time.sleep(0.3)
            else:  # the last cycle drains whatever is left
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    confirmed = {
                        (p, o)
                        for c in [*cycles, share_worker_rows(out)]
                        for k, p, o in c
                        if k == "C"
                    }
                    if len(confirmed) >= RECORDS:
                        break
                    time.sleep(0.5)
        finally:
            worker.kill()
            worker.wait()
        cycles.append(share_worker_rows(out))
        if cycle < KILLS:
            broker = start_broker(data, CONFIG)
    broker.stop()

    delivered_before: set[tuple[int, int]] = set()
    confirmed_before: set[tuple[int, int]] = set()
    redelivered_unconfirmed = 0
    for rows in cycles:
        delivered = {(p, o) for k, p, o in rows if k == "D"}
        # No record whose acknowledgement was confirmed in an earlier cycle comes back.
        assert not delivered & confirmed_before, sorted(delivered & confirmed_before)[:10]
        redelivered_unconfirmed += len(delivered & (delivered_before - confirmed_before))
        delivered_before |= delivered
        confirmed_before |= {(p, o) for k, p, o in rows if k == "C"}
    # Nothing produced is lost: every record was delivered and, by the end, confirmed.
    every = {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}
    assert confirmed_before == every
    # Records delivered but not confirmed before a kill were delivered again.
    assert redelivered_unconfirmed > 0
    assert sum(len([r for r in c if r[0] == "D"]) for c in cycles) > RECORDS  # some came twice
    assert all(any(k == "D" for k, _, _ in c) for c in cycles[:KILLS])  # every kill hit mid-stream
