"""`shoal migrate` between two real Shoal brokers (source and target on free ports).

Issue 36's picture: three topics (one compacted, one produced with gzip batches) plus a
dead-letter topic, 30,000 records with keys and headers, a consumer group committed mid-way,
a share group that ACCEPTed, RELEASEd and REJECTed (the rejected copied to its dead-letter
topic), topic and group configs, ACLs and a SCRAM user. The migration is stopped midway
(`--max-records`) and resumed; a second test kills it (-9) while it copies and resumes.

Kafka facts relied on: AlterShareGroupOffsets sets the SPSO of an empty share group (KIP-932,
"Admin API: alterShareGroupOffsets"); the share-group lag counts records from the SPSO not yet
acknowledged or archived (KIP-1226); AlterUserScramCredentials takes a salted password, which
no broker keeps (KIP-554), so users are recreated from given passwords.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer
from confluent_kafka import TopicPartition

from client.admin import Admin
from client.admin import ConfigResourceType
from client.share_acks import AcknowledgeType
from client.share_consumer import ShareConsumer
from client.users import describe_users
from client.users import upsert_user
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclOperation
from protocol.acl import AclPermissionType
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType
from tests.brokers import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).parents[2]
TOPICS = {"orders": 3, "compacted": 1, "zipped": 2, "dlq.zipped": 1}
BROKER_PROPS = (
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
    "super.users=User:ANONYMOUS\n"
)
Rec = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


def shoal(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture()
def brokers(tmp_path: Path) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    props = tmp_path / "broker.properties"
    props.write_text(BROKER_PROPS)
    extra = ["--config", str(props)]
    with (
        BrokerProcess(tmp_path / "src", extra=extra) as src,
        BrokerProcess(tmp_path / "dst", extra=extra) as dst,
    ):
        yield src, dst


def read_all(bootstrap: str, topic: str, partition: int, start: int = 0) -> list[Rec]:
    """Every data record of a partition from `start`, as (offset, key, value, headers, ts)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, partition, start)])
    out: list[Rec] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == CKError._PARTITION_EOF, m.error()
                    return out
                headers = tuple(m.headers() or ())
                out.append((m.offset(), m.key(), m.value(), headers, m.timestamp()[1]))
    finally:
        c.close()
    raise AssertionError(f"{topic}-{partition}: no end in 30 s")


def content(records: list[Rec]) -> list[tuple[Any, ...]]:
    return [r[1:] for r in records]


def produce(bootstrap: str, topic: str, n: int, keys: int, **conf: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf})
    for i in range(n):
        p.produce(
            topic,
            value=f"{topic}-value-{i}".encode() * 3,
            key=f"k{i % keys}".encode(),
            headers=[("n", str(i).encode()), ("src", b"shoal")],
            timestamp=1_700_000_000_000 + i,
        )
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def commit_half(bootstrap: str) -> None:
    """A consumer group reads 5,000 of orders' records and commits where it stopped."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cg",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["orders"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 5000 and time.monotonic() < deadline:
        seen += sum(1 for m in c.consume(500, timeout=0.5) if m.error() is None)
    c.commit(asynchronous=False)
    c.close()
    assert seen >= 5000


async def share_work(bootstrap: str) -> set[tuple[int, int]]:
    """Share group sg ACCEPTs, RELEASEs and REJECTs zipped's records by turns; returns the
    (partition, offset) of every record it finished (accepted or rejected)."""
    finished: set[tuple[int, int]] = set()
    turns = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
    handled = 0
    async with ShareConsumer(bootstrap, "sg", acknowledgement_mode="explicit") as c:
        c.subscribe(["zipped"])
        deadline = asyncio.get_running_loop().time() + 30
        while handled < 1500:
            assert asyncio.get_running_loop().time() < deadline
            for r in await c.poll(0.5):
                ack = turns[handled % 3] if r.delivery_count == 1 else AcknowledgeType.ACCEPT
                c.acknowledge(r, ack)
                if ack != AcknowledgeType.RELEASE:
                    finished.add((r.partition, r.offset))
                handled += 1
        await c.commit_sync()
    return finished


async def set_up_source(bootstrap: str) -> set[tuple[int, int]]:
    async with Admin(bootstrap) as a:
        await a.create_topic("orders", 3, {"retention.ms": "604800000"})
        await a.create_topic("compacted", 1, {"cleanup.policy": "compact"})
        await a.create_topic("zipped", 2)
        await a.create_topic("dlq.zipped", 1, {"errors.deadletterqueue.group.enable": "true"})
        await a.incremental_alter_configs(
            ConfigResourceType.GROUP,
            "sg",
            {
                "share.auto.offset.reset": "earliest",
                "errors.deadletterqueue.topic.name": "dlq.zipped",
            },
        )
        await a.create_acls(
            [
                AclBinding(
                    ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                    AccessControlEntry(
                        "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW
                    ),
                ),
                AclBinding(
                    ResourcePattern(ResourceType.GROUP, "zip", PatternType.PREFIXED),
                    AccessControlEntry("User:bob", "*", AclOperation.ALL, AclPermissionType.DENY),
                ),
            ]
        )
        await upsert_user(a.cluster, "alice", "SCRAM-SHA-512", "alice-secret", 8192)
    produce(bootstrap, "orders", 20_000, 997)
    produce(bootstrap, "compacted", 5_000, 200)
    produce(bootstrap, "zipped", 5_000, 50, **{"compression.type": "gzip"})
    commit_half(bootstrap)
    finished = await share_work(bootstrap)
    rejected = 500  # every third record handled; the broker copies them to dlq.zipped
    async with Admin(bootstrap) as a:
        deadline = time.monotonic() + 30
        while await a.list_offsets("dlq.zipped", 0, "latest") < rejected:
            assert time.monotonic() < deadline, "the dead-letter copies never came"
            await asyncio.sleep(0.05)
    return finished


async def share_consume_all(bootstrap: str) -> list[tuple[int, bytes | None]]:
    """Everything share group sg gets on the target, accepted, until 2 s bring nothing."""
    got: list[tuple[int, bytes | None]] = []
    async with ShareConsumer(bootstrap, "sg", acknowledgement_mode="explicit") as c:
        c.subscribe(["zipped"])
        loop = asyncio.get_running_loop()
        quiet_until = loop.time() + 5
        while loop.time() < quiet_until:
            records = await c.poll(0.5)
            for r in records:
                c.acknowledge(r, AcknowledgeType.ACCEPT)
                got.append((r.partition, r.value))
            if records:
                quiet_until = loop.time() + 2
        await c.commit_sync()
    return got


def test_migrate_moves_records_groups_configs_acls_and_users(
    brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path
) -> None:
    src, dst = brokers
    finished = asyncio.run(set_up_source(src.bootstrap))
    common = ["--from", src.bootstrap, "--to", dst.bootstrap, "--state-dir", str(tmp_path / "st")]

    dry = shoal("migrate", *common, "--dry-run").stdout
    assert "orders" in dry and "up to 20000 records" in dry and "would copy" in dry
    # Each topic's bytes on the source (DescribeLogDirs), and the totals.
    assert re.search(r"orders +would copy +3 partitions, up to 20000 records, [\d.]+ [KM]iB", dry)
    assert re.search(
        r"total +4 topics +would copy +7 partitions, up to \d+ records, [\d.]+ [KM]iB", dry
    )
    planned = json.loads(shoal("migrate", *common, "--dry-run", "--json").stdout)["planned"]
    assert {p["topic"]: p["partitions"] for p in planned} == TOPICS
    assert all(p["bytes"] > 0 for p in planned), planned
    assert "recreate on the target" in dry  # alice: credentials are not readable
    assert asyncio.run(_topics(dst.bootstrap)) == set()  # nothing made

    stopped = shoal("migrate", *common, "--max-records", "12000").stdout
    assert "stopped" in stopped
    again = shoal("migrate", *common, check=False)  # over a state dir without --resume: refused
    assert again.returncode == 2 and "--resume" in again.stderr
    passwords = tmp_path / "passwords"
    passwords.write_text("alice=alice-secret\n")
    done = shoal("migrate", *common, "--resume", "--user-passwords", str(passwords), "--json")
    report = json.loads(done.stdout)

    # Every record, identical and in order per partition; nothing twice (stopped and resumed).
    for topic, partitions in TOPICS.items():
        for p in range(partitions):
            theirs = read_all(src.bootstrap, topic, p)
            ours = read_all(dst.bootstrap, topic, p)
            assert content(ours) == content(theirs), f"{topic}-{p}"
    assert sum(len(read_all(dst.bootstrap, "orders", p)) for p in range(3)) == 20_000

    # The consumer group resumes on the target exactly where it stopped on the source.
    asyncio.run(_check_consumer_group(src.bootstrap, dst.bootstrap))

    # The share group delivers every record not finished on the source, and only the counted
    # ones again.
    counted = sum(x["records"] for x in report["redelivered"]["sg"])
    assert counted > 0
    zipped = {(p, r[2]): r[1] for p in range(2) for r in read_all(src.bootstrap, "zipped", p)}
    values_finished = {
        (p, r[2]) for p in range(2) for r in read_all(src.bootstrap, "zipped", p)
        if (p, r[0]) in finished
    }  # fmt: skip
    delivered = asyncio.run(share_consume_all(dst.bootstrap))
    assert len(delivered) == len(set(delivered))
    assert set(zipped) - values_finished <= set(delivered)
    assert len(delivered) == len(zipped) - len(values_finished) + counted

    asyncio.run(_check_configs_acls_users(src.bootstrap, dst.bootstrap))


async def _topics(bootstrap: str) -> set[str]:
    async with Admin(bootstrap) as a:
        return set(await a.list_topics())


async def _check_consumer_group(src: str, dst: str) -> None:
    async with Admin(src) as a, Admin(dst) as b:
        theirs = await a.list_consumer_group_offsets("cg")
        ours = await b.list_consumer_group_offsets("cg")
    assert set(ours) == set(theirs)
    for (topic, p), committed in theirs.items():
        rest = content(read_all(src, topic, p, committed.offset))
        assert content(read_all(dst, topic, p, ours[(topic, p)].offset)) == rest


async def _check_configs_acls_users(src: str, dst: str) -> None:
    async with Admin(src) as a, Admin(dst) as b:
        compacted = await b.describe_configs(ConfigResourceType.TOPIC, "compacted")
        assert compacted["cleanup.policy"] == "compact"
        orders = await b.describe_configs(ConfigResourceType.TOPIC, "orders")
        assert orders["retention.ms"] == "604800000"
        group = await b.describe_configs(ConfigResourceType.GROUP, "sg")
        assert group["errors.deadletterqueue.topic.name"] == "dlq.zipped"
        assert group["share.auto.offset.reset"] == "earliest"
        assert set(await b.describe_acls()) == set(await a.describe_acls())
        assert (await describe_users(b.cluster))["alice"] == {"SCRAM-SHA-512": 8192}


def test_a_killed_migration_resumes_without_duplicates(
    brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path
) -> None:
    """Killed (-9) mid-copy, records produced after the last checkpoint are found on the target
    at --resume and not produced again. Small fetches slow the copy so the kill lands midway."""
    src, dst = brokers
    asyncio.run(_create(src.bootstrap))
    produce(src.bootstrap, "orders", 30_000, 100)  # enough that the kill lands midway
    slow = tmp_path / "slow.properties"
    slow.write_text(
        "max.partition.fetch.bytes=2048\nfetch.max.bytes=2048\nmessage.max.bytes=2048\n"
    )
    state = str(tmp_path / "st")
    common = ["--from", src.bootstrap, "--to", dst.bootstrap, "--state-dir", state]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "migrate", *common, "--command-config", str(slow)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while asyncio.run(_copied(dst.bootstrap)) < 1000:
            assert time.monotonic() < deadline and proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert asyncio.run(_copied(dst.bootstrap)) < 30_000  # killed midway
    shoal("migrate", *common, "--resume")
    for p in range(3):
        assert content(read_all(dst.bootstrap, "orders", p)) == content(
            read_all(src.bootstrap, "orders", p)
        )


async def _create(bootstrap: str) -> None:
    async with Admin(bootstrap) as a:
        await a.create_topic("orders", 3)


async def _copied(bootstrap: str) -> int:
    async with Admin(bootstrap) as a:
        if "orders" not in await a.list_topics():
            return 0
        return sum([await a.list_offsets("orders", p, "latest") for p in range(3)])


def test_the_readme_move_runs_as_written(
    brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path
) -> None:
    """README's "Moving to Apache Kafka" block, run with bash in an empty directory whose
    `.venv` is this interpreter's; only the two addresses change."""
    src, dst = brokers
    asyncio.run(_create(src.bootstrap))
    produce(src.bootstrap, "orders", 300, 10)
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n### Moving to Apache Kafka\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    script = block.replace("127.0.0.1:9092", src.bootstrap).replace("127.0.0.1:9192", dst.bootstrap)
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "would copy" in done.stdout and "300 records (300 in this run)" in done.stdout
    assert re.search(
        r"orders +would copy +3 partitions, up to 300 records, [\d.]+ KiB", done.stdout
    )
    assert re.search(r"total +1 topic +would copy +3 partitions, up to 300 records", done.stdout)
    for p in range(3):
        assert content(read_all(dst.bootstrap, "orders", p)) == content(
            read_all(src.bootstrap, "orders", p)
        )
