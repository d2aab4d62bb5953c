"""`shoal dlq redrive` (issue 35 part 3) with confluent-kafka's real clients around it.

A ShareConsumer REJECTs records into its group's dead-letter topic (group configs as
`test_dead_letter_topics.py` sets them); the tool sends them back to the source topic, where
the same, unchanged ShareConsumer group receives each once; a second run redrives none. The
letters' headers are Kafka's (KIP-1191; `ShareGroupDLQStateManager.ProduceRequestHandler` in
apache/kafka writes `__dlq.errors.topic`, `.partition`, `.offset`, `.group`,
`.delivery.count`, `.message`, and the source record's key and value only with
`errors.deadletterqueue.copy.record.enable`, never its headers). Letters written by hand
check what the broker never writes: a missing source topic, a redrive count already there.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from client.producer import default_partition
from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = pytest.mark.compat

BROKER_CONFIG = SHORT_SESSION_CONFIG
ENABLE = "errors.deadletterqueue.group.enable"
COPY = "errors.deadletterqueue.copy.record.enable"
PARTITIONS = 3
_names = itertools.count()

Row = tuple[int, int, bytes | None, bytes | None, dict[str, bytes | None]]


def redrive(broker: BrokerProcess, dlq: str, *extra: str) -> tuple[dict[str, object], str]:
    """`shoal dlq redrive --json`: its report, and its stderr; fails the test on exit != 0."""
    done = _cli(broker, dlq, *extra)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report, done.stderr


def _cli(broker: BrokerProcess, dlq: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "cli",
        "dlq",
        "redrive",
        "--bootstrap-server",
        broker.bootstrap,
        "--dlq-topic",
        dlq,
        "--json",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def counts(report: dict[str, object]) -> dict[str, tuple[int, int]]:
    """(redriven, not redriven) per source topic."""
    rows = report["topics"]
    assert isinstance(rows, list)
    return {r["topic"]: (r["redriven"], r["not_redriven"]) for r in rows}


def rejected_into_dlq(broker: BrokerProcess, n: int, copy: bool) -> tuple[str, str, str]:
    """A source topic of PARTITIONS partitions holding k0..k{n-1} (placed by murmur2, as Java's
    producer places keys), its dead-letter topic, and a group that REJECTed every record; returns
    once the dead-letter topic holds them all."""
    i = next(_names)
    topic, dlq, group = f"redrive-src{i}", f"dlq.redrive{i}", f"redrive-g{i}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    client = admin(broker.bootstrap)  # held: its futures fail if it goes first
    client.create_topics([NewTopic(dlq, 1, 1, config={ENABLE: "true"})])[dlq].result(10)
    set_group_configs(
        broker.bootstrap,
        group,
        {
            "share.auto.offset.reset": "earliest",
            "errors.deadletterqueue.topic.name": dlq,
            COPY: "true" if copy else "false",
        },
    )
    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", **QUIET})
    for k in range(n):
        p.produce(topic, key=b"k%d" % k, value=b"v%d" % k, headers=[("trace", b"t%d" % k)])
    assert p.flush(10) == 0
    c = share_consumer(broker.bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    try:
        while seen < n and time.monotonic() < deadline:
            for m in poll_records(c, 0.2):
                c.acknowledge(m, AcknowledgeType.REJECT)
                seen += 1
            c.commit_sync(10)
    finally:
        c.close()
    assert seen == n
    assert len(read_all(broker, dlq, n)) == n
    return topic, dlq, group


def read_all(broker: BrokerProcess, topic: str, expected: int, partitions: int = 1) -> list[Row]:
    """(partition, offset, key, value, headers) of every record of `topic`, once there are
    `expected` (or 15 s passed), then 1 s more to catch any extra."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "redrive-reader", **QUIET})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Row] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.3):
                if m.error() is None:
                    out.append(
                        (m.partition(), m.offset(), m.key(), m.value(), dict(m.headers() or []))
                    )
            if len(out) >= expected:
                deadline = min(deadline, time.monotonic() + 1)
    finally:
        c.close()
    return out


def test_rejected_records_come_back_to_the_group_once(broker: BrokerProcess) -> None:
    topic, dlq, group = rejected_into_dlq(broker, 20, copy=True)
    report, _ = redrive(broker, dlq)
    assert counts(report) == {topic: (20, 0)}
    again, _ = redrive(broker, dlq)  # progress was committed: nothing twice
    assert (again["read"], counts(again)) == (0, {})

    back = [r for r in read_all(broker, topic, 40, PARTITIONS) if r[1] >= 0]
    redriven = [r for r in back if "shoal.redrive.count" in r[4]]
    assert len(redriven) == 20 and len(back) == 40
    originals = {r[2]: r[0] for r in back if r not in redriven}
    for partition, _, key, value, headers in redriven:
        assert key is not None and value == b"v" + key[1:]
        # By key, as Kafka's producers partition (murmur2): where the original went.
        assert partition == default_partition(key, PARTITIONS) == originals[key]
        # The letter's __dlq.* headers stay behind; the source's own never reached the letter.
        assert headers == {"shoal.redrive.count": b"1"}

    # The group that rejected them gets them once more, at their new offsets, and only once.
    c = share_consumer(broker.bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    got: list[bytes] = []
    quiet = 0.0
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and (len(got) < 20 or time.monotonic() < quiet):
            records = poll_records(c, 0.2)
            for m in records:
                got.append(m.key())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
            if len(got) < 20 or records:
                quiet = time.monotonic() + 2.0  # then 2 s without any record
    finally:
        c.close()
    assert sorted(got) == sorted(b"k%d" % k for k in range(20))


def test_dry_run_counts_and_writes_nothing(broker: BrokerProcess) -> None:
    topic, dlq, _ = rejected_into_dlq(broker, 6, copy=True)
    for _ in range(2):  # the second dry run sees the same: nothing was committed
        report, _ = redrive(broker, dlq, "--dry-run")
        assert (report["dry_run"], report["read"], counts(report)) == (True, 6, {topic: (6, 0)})
    assert len(read_all(broker, topic, 6, PARTITIONS)) == 6  # nothing produced
    report, _ = redrive(broker, dlq)
    assert counts(report) == {topic: (6, 0)}


def test_letters_without_key_and_value_are_counted_and_committed_past(
    broker: BrokerProcess,
) -> None:
    topic, dlq, _ = rejected_into_dlq(broker, 5, copy=False)
    report, stderr = redrive(broker, dlq)
    assert counts(report) == {topic: (0, 5)}
    assert f"5 dead letter(s) of {topic} not redriven" in stderr
    assert "errors.deadletterqueue.copy.record.enable=false" in stderr
    assert f"{topic}-" in stderr  # where to find them: topic-partition@offset
    again, _ = redrive(broker, dlq)
    assert (again["read"], counts(again)) == (0, {})
    assert len(read_all(broker, topic, 5, PARTITIONS)) == 5  # nothing was sent


def _letter(topic: str | None, key: bytes, *headers: tuple[str, bytes]) -> dict[str, object]:
    context = (
        []
        if topic is None
        else [
            ("__dlq.errors.topic", topic.encode()),
            ("__dlq.errors.partition", b"0"),
            ("__dlq.errors.offset", b"7"),
        ]
    )
    return {"key": key, "value": b"value of " + key, "headers": [*context, *headers]}


def test_a_missing_source_topic_stops_the_run_where_it_is(broker: BrokerProcess) -> None:
    i = next(_names)
    topic, gone, dlq = f"redrive-hand{i}", f"redrive-gone{i}", f"dlq.hand{i}"
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dlq, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    letters = [
        _letter(topic, b"a", ("trace", b"t-a"), ("shoal.redrive.count", b"2")),
        _letter(None, b"b"),  # not a dead letter: nothing names its source
        _letter(gone, b"c"),
        _letter(topic, b"d"),
    ]
    for letter in letters:
        p.produce(dlq, partition=0, **letter)  # type: ignore[arg-type]
    assert p.flush(10) == 0

    report, _ = redrive(broker, dlq, "--dry-run")  # says it all, stops at nothing
    assert counts(report) == {topic: (2, 0), "-": (0, 1), gone: (0, 1)}

    done = _cli(broker, dlq)
    assert done.returncode == 1, done.stderr
    assert f"source topic '{gone}'" in done.stderr and "does not exist" in done.stderr
    report = json.loads(done.stdout)
    assert counts(report) == {topic: (1, 0), "-": (0, 1)}
    (a,) = read_all(broker, topic, 1)
    # The letter's own headers go back, its redrive count one higher.
    assert (a[2], a[4]) == (b"a", {"trace": b"t-a", "shoal.redrive.count": b"3"})

    create_topic(broker.bootstrap, gone, 1)  # the next run starts at the letter that failed
    report, _ = redrive(broker, dlq)
    assert counts(report) == {gone: (1, 0), topic: (1, 0)}
    assert [r[2] for r in read_all(broker, topic, 2)] == [b"a", b"d"]
    assert [r[2] for r in read_all(broker, gone, 1)] == [b"c"]


def test_max_records_and_rate(broker: BrokerProcess) -> None:
    i = next(_names)
    topic, dlq = f"redrive-paced{i}", f"dlq.paced{i}"
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, dlq, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for k in range(12):
        p.produce(dlq, partition=0, **_letter(topic, b"%d" % k))  # type: ignore[arg-type]
    assert p.flush(10) == 0
    report, _ = redrive(broker, dlq, "--max-records", "8", "--rate", "10")
    assert counts(report) == {topic: (8, 0)}
    report, _ = redrive(broker, dlq)
    assert counts(report) == {topic: (4, 0)}
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "paced", **QUIET})
    c.assign([TopicPartition(topic, 0, 0)])
    stamps: list[int] = []
    deadline = time.monotonic() + 15
    while len(stamps) < 8 and time.monotonic() < deadline:
        stamps += [m.timestamp()[1] for m in c.consume(8 - len(stamps), 0.5) if not m.error()]
    c.close()
    # 8 records at 10/s: the first and the eighth produced at least 0.7 s apart (a floor only:
    # a loaded machine makes it slower, never faster).
    assert len(stamps) == 8 and stamps[-1] - stamps[0] >= 650


def test_a_missing_dead_letter_topic_is_an_error(broker: BrokerProcess) -> None:
    done = _cli(broker, "dlq.nowhere")
    assert done.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in done.stderr


def test_exit_codes_without_a_broker(tmp_path: Path) -> None:
    """As every `shoal` tool (`cli/common.py`): 3 unreachable, 2 usage, in one line."""
    unreachable = _cli_at("127.0.0.1:1", "--command-timeout", "2")
    assert unreachable.returncode == 3
    assert unreachable.stderr.splitlines() == [
        "shoal: cannot reach the broker at 127.0.0.1:1: Failed to get metadata: "
        "Local: Broker transport failure"
    ]  # librdkafka's own log lines kept out of it
    missing = _cli_at("127.0.0.1:1", "--command-config", str(tmp_path / "none.properties"))
    assert missing.returncode == 2 and "--command-config" in missing.stderr
    assert _cli_at("127.0.0.1:1", "--rate", "0").returncode == 2


def _cli_at(bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cli", "dlq", "redrive", "--bootstrap-server", bootstrap,
           "--dlq-topic", "dlq.x", *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
