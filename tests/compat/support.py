"""Helpers for driving a real broker with confluent-kafka's real clients (librdkafka)."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from client import Admin
from client.errors import KafkaError as ClientKafkaError
from tests.brokers import start_broker as start_broker  # where the compat tests find it

# librdkafka prints a "Preview" warning for every share consumer; keep test output readable.
QUIET = {"log_level": 3}

# Broker settings for the share-group tests: members that vanish are noticed within seconds.
SHORT_SESSION_CONFIG = {
    "group.share.min.session.timeout.ms": 2000,
    "group.share.session.timeout.ms": 3000,
    "group.share.min.heartbeat.interval.ms": 500,
    "group.share.heartbeat.interval.ms": 1000,
}


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET})


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 10.0) -> None:
    client = admin(bootstrap)  # the futures fail if their client is destroyed first
    futures = client.create_topics([NewTopic(topic, partitions, 1)])
    for f in futures.values():
        f.result(timeout)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs (SET) on a group resource; raises KafkaException on refusal."""
    resource = ConfigResource(
        "group",
        group,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ],
    )
    client = admin(bootstrap)
    client.incremental_alter_configs([resource])[resource].result(10)


def describe_group_configs(bootstrap: str, group: str) -> dict[str, str | None]:
    resource = ConfigResource("group", group)
    client = admin(bootstrap)
    entries = client.describe_configs([resource])[resource].result(10)
    return {name: entry.value for name, entry in entries.items()}


def error_code(exc: BaseException) -> int:
    """The Kafka error code inside a KafkaException raised by a future."""
    assert isinstance(exc, KafkaException), repr(exc)
    err = exc.args[0]
    assert isinstance(err, KafkaError), repr(err)
    return int(err.code())


def share_consumer(bootstrap: str, group: str, **config: object) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET, **config})


def explicit_consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    """A share consumer of `group` in explicit acknowledgement mode, subscribed to `topic`."""
    c = share_consumer(bootstrap, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    return c


_names = itertools.count()


def fresh_names(prefix: str) -> tuple[str, str]:
    """A topic and a group that no other test of the run has used (tests of a module share
    one broker): `<prefix>N` and `<prefix>-gN`."""
    n = next(_names)
    return f"{prefix}{n}", f"{prefix}-g{n}"


def poll_records(consumer: ShareConsumer, timeout: float = 0.5) -> list[Message]:
    """One poll: the good records it returned (a record carrying an error fails the test)."""
    out: list[Message] = []
    for msg in consumer.poll(timeout):
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(f"share consumer returned an error: {err}")
        out.append(msg)
    return out


def poll_until(
    consumers: Iterable[ShareConsumer],
    done: Callable[[], bool],
    on_records: Callable[[ShareConsumer, list[Message]], None],
    timeout: float,
    poll_timeout: float = 0.2,
) -> None:
    """Round-robin polls until `done()` or the deadline (no assertion on the deadline)."""
    group = list(consumers)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done():
        for c in group:
            records = poll_records(c, poll_timeout)
            if records:
                on_records(c, records)


async def _share_members_assigned(bootstrap: str, group: str, count: int) -> bool:
    async with Admin(bootstrap) as client:
        try:
            described = (await client.describe_share_groups([group]))[group]
        except ClientKafkaError:  # GROUP_ID_NOT_FOUND until the first member joins
            return False
    members = described.members
    return len(members) == count and all(
        m.member_epoch == described.assignment_epoch and m.assignment for m in members
    )


def wait_for_share_members(bootstrap: str, group: str, count: int, timeout: float = 30.0) -> None:
    """Until the share group has `count` members, each at the group's assignment epoch with
    partitions assigned (ShareGroupDescribe): every member has had its assignment."""
    deadline = time.monotonic() + timeout
    while not asyncio.run(_share_members_assigned(bootstrap, group, count)):
        assert time.monotonic() < deadline, f"{group}: not {count} assigned members in {timeout} s"
        time.sleep(0.1)


async def _share_start_offsets(bootstrap: str, group: str) -> int:
    async with Admin(bootstrap) as client:
        try:
            offsets = await client.describe_share_group_offsets(group)
        except ClientKafkaError as e:  # a consumer still joining: no group yet, nothing acked
            if e.error_code is not ErrorCode.group_id_not_found:
                raise
            return 0
    return sum(max(o.start_offset, 0) for o in offsets.values())


def wait_for_share_acknowledged(
    bootstrap: str, group: str, total: int, timeout: float = 30.0
) -> None:
    """Until the share group's start offsets (SPSO) of all its partitions add up to `total`:
    every record is acknowledged, so none can be delivered again. For topics whose offsets
    are all records (no control batches) and start at 0."""
    deadline = time.monotonic() + timeout
    while asyncio.run(_share_start_offsets(bootstrap, group)) < total:
        assert time.monotonic() < deadline, f"{group}: not all {total} records acknowledged"
        time.sleep(0.1)


def read_partition(bootstrap: str, topic: str, partition: int = 0) -> list[bytes]:
    """Every value of a partition from offset 0, with a plain Consumer (3 s of quiet ends it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", **QUIET})
    c.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    idle = 0
    while idle < 3:
        batch = c.consume(1000, timeout=1)
        idle = 0 if batch else idle + 1
        values.extend(m.value() for m in batch if m.error() is None)
    c.close()
    return values


def start_share_worker(
    bootstrap: str, group: str, topic: str, out: Path, mode: str = "accept"
) -> subprocess.Popen[bytes]:
    """`tests.compat.share_worker` in a child process (so a kill test can kill the broker
    under it), writing one line per delivery and confirmed acknowledgement to `out`;
    `mode` "reject" rejects every record instead of accepting it."""
    cmd = [
        sys.executable, "-m", "tests.compat.share_worker", bootstrap, group, topic, str(out), mode
    ]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def share_worker_rows(out: Path) -> list[tuple[str, int, int]]:
    """The worker's (kind, partition, offset) lines; a line cut by a kill is left out."""
    rows = []
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            rows.append((parts[0], int(parts[1]), int(parts[2])))
    return rows


# The log `write_transactions` leaves, and what read_committed may read of it.
COMMITTED = ["c1", "c2", "plain"]
EVERYTHING = ["c1", "c2", "a1", "plain", "a2", "open1", "c3"]


def _send_one(producer: Producer, topic: str, value: str) -> None:
    producer.produce(topic, value=value.encode(), partition=0)
    assert producer.flush(30) == 0


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **QUIET})
    p.init_transactions(30)
    return p


def write_transactions(bootstrap: str, topic: str) -> Producer:
    """Partition 0 of `topic` (made before) becomes the log of EVERYTHING, written by a real
    transactional producer: c1 c2 COMMIT | a1 plain a2 ABORT | open1 (left open) | c3 COMMIT.
    Returns the producer whose transaction is still open (abort it after the test)."""
    writer = _transactional(bootstrap, f"{topic}-writer")
    other = _transactional(bootstrap, f"{topic}-other")
    plain = Producer({"bootstrap.servers": bootstrap, **QUIET})
    writer.begin_transaction()
    _send_one(writer, topic, "c1")
    _send_one(writer, topic, "c2")
    writer.commit_transaction(30)
    writer.begin_transaction()
    _send_one(writer, topic, "a1")
    _send_one(plain, topic, "plain")  # not transactional: kept, inside the aborted one
    _send_one(writer, topic, "a2")
    writer.abort_transaction(30)
    other.begin_transaction()
    _send_one(other, topic, "open1")  # left open: the LSO stays here
    writer.begin_transaction()
    _send_one(writer, topic, "c3")  # committed, but past the LSO: not visible yet
    writer.commit_transaction(30)
    return other
