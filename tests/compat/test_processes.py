"""`shoal serve --processes 2` with confluent-kafka's unchanged clients (issue 33).

Two broker processes under one supervisor, each leading half the partitions and coordinating
the groups that hash to it (docs/multicore.md). librdkafka finds the leaders and coordinators
from Metadata and FindCoordinator as it would in a Kafka cluster of two brokers; a request for
a partition led by the other process gets NOT_LEADER_OR_FOLLOWER (Kafka's answer on a broker
that is not the leader: `ReplicaManager.getPartitionOrError`), and the client goes to the
leader. One process is killed with SIGKILL mid-stream, three times; the supervisor starts it
again. The README's "Every core" block runs here as written.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import Message
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition

from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import poll_records
from tests.compat.support import read_partition
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC, PARTITIONS, RECORDS = "orders", 4, 2000
SHARE_GROUP, CONSUMER_GROUP = "workers", "audit"
ROOT = Path(__file__).parents[2]


def _coordinator(group: str) -> int:
    return zlib.crc32(group.encode()) % 2


def start_two(data: Path) -> tuple[BrokerProcess, dict[int, int]]:
    broker = configured_broker(data, SHORT_SESSION_CONFIG)
    broker.port = free_ports(2)
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    return broker, wait_for_nodes(broker, 2, timeout=90)


def kill_9(broker: BrokerProcess, nodes: dict[int, int], node: int) -> dict[int, int]:
    """SIGKILL one broker process; the supervisor starts it again (new pid, listening)."""
    os.kill(nodes[node], 9)
    return wait_for_nodes(broker, 2, timeout=90, not_pids={nodes[node]})


def produce_in_background(bootstrap: str, acked: list[tuple[int, int]]) -> threading.Thread:
    """Record i goes to partition i % 4, in order, acks=all and idempotent; `acked` gets
    (partition, i) for each record the broker confirmed."""

    def run() -> None:
        p = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
             "message.timeout.ms": 120_000, **QUIET}
        )  # fmt: skip

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                acked.append((msg.partition(), int(msg.value())))

        for i in range(RECORDS):
            p.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
            p.poll(0)
            if i % 100 == 0:
                time.sleep(0.05)  # spread over a few seconds, so a kill lands mid-stream
        assert p.flush(150) == 0

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_producers_share_consumers_and_a_group_across_two_processes_and_kill_9(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    broker, nodes = start_two(data)
    try:
        bootstrap = broker.bootstrap
        md = admin(bootstrap).list_topics(timeout=20)
        assert {b.id: b.port for b in md.brokers.values()} == {0: broker.port, 1: broker.port + 1}
        assert md.controller_id == 0
        create_topic(bootstrap, TOPIC, PARTITIONS, timeout=30)
        set_group_configs(bootstrap, SHARE_GROUP, {"share.auto.offset.reset": "earliest"})
        leaders = {
            p.id: p.leader
            for p in admin(bootstrap).list_topics(TOPIC, 20).topics[TOPIC].partitions.values()
        }
        assert sorted(set(leaders.values())) == [0, 1]  # (crc32(id) + p) % 2: both lead two

        # Producing, with node 1 killed -9 in the middle: nothing acknowledged is lost.
        acked: list[tuple[int, int]] = []
        producing = produce_in_background(bootstrap, acked)
        deadline = time.monotonic() + 60
        while len(acked) < RECORDS // 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        nodes = kill_9(broker, nodes, 1)
        producing.join(180)
        assert not producing.is_alive()
        assert len(acked) == RECORDS
        for p in range(PARTITIONS):  # order per partition; no loss; no duplicate
            values = [int(v) for v in read_partition(bootstrap, TOPIC, p)]
            assert values == list(range(p, RECORDS, PARTITIONS))

        nodes = share_consumers_across_a_kill(broker, nodes, set(acked))
        consumer_group_on_its_coordinator(broker, nodes, data)
        assert broker.stop(60) == 0
    finally:
        broker.stop(60)


def _values(consumer: ShareConsumer) -> list[tuple[int, int]]:
    """One poll's records as (partition, value); error events (a process restarting) skipped."""
    return [(m.partition(), int(m.value())) for m in consumer.poll(0.3) if m.error() is None]


def share_consumers_across_a_kill(
    broker: BrokerProcess, nodes: dict[int, int], acked: set[tuple[int, int]]
) -> dict[int, int]:
    """Two share consumers; the share group's coordinator (also the leader of two partitions)
    killed -9 a third of the way: every record delivered at least once, a record delivered
    twice only across the kill. Then, no kill: 200 more records, each delivered once."""
    consumers = [share_consumer(broker.bootstrap, SHARE_GROUP) for _ in range(2)]
    for c in consumers:
        c.subscribe([TOPIC])
    seen: list[tuple[int, int]] = []
    killed_at = None
    deadline = time.monotonic() + 180
    while len(set(seen)) < RECORDS and time.monotonic() < deadline:
        for c in consumers:
            seen += _values(c)
        if killed_at is None and len(seen) >= RECORDS // 3:
            killed_at = len(seen)
            nodes = kill_9(broker, nodes, _coordinator(SHARE_GROUP))
    assert set(seen) == acked and killed_at is not None
    before, after = seen[:killed_at], seen[killed_at:]
    assert len(before) == len(set(before)) and len(after) == len(set(after))

    extra = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
    for i in range(RECORDS, RECORDS + 200):
        extra.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
    assert extra.flush(30) == 0
    later: list[int] = []
    deadline = time.monotonic() + 60
    while len(later) < 200 and time.monotonic() < deadline:
        for c in consumers:
            later += [v for _, v in _values(c) if v >= RECORDS]
    assert sorted(later) == list(range(RECORDS, RECORDS + 200))
    for c in consumers:
        c.close()
    return nodes


def consumer_group_on_its_coordinator(
    broker: BrokerProcess, nodes: dict[int, int], data: Path
) -> None:
    """A consumer group reads everything and commits: its coordinator (crc32 % 2) holds its
    members and offsets, and the commit survives that process's kill -9."""
    bootstrap = broker.bootstrap
    group = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": CONSUMER_GROUP,
         "auto.offset.reset": "earliest", "enable.auto.commit": False, **QUIET}
    )  # fmt: skip
    group.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 60
    while got < RECORDS + 200 and time.monotonic() < deadline:
        got += sum(1 for m in group.consume(500, 0.5) if m.error() is None)
    assert got == RECORDS + 200
    group.commit(asynchronous=False)
    # The log ends (share state's control batches take offsets too), as committed.
    ends = [group.get_watermark_offsets(TopicPartition(TOPIC, p), 20)[1] for p in range(4)]
    wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    assert [tp.offset for tp in group.committed(wanted, 20)] == ends
    group.close()
    home = _coordinator(CONSUMER_GROUP)
    # Its commit is in its coordinator's own offsets log, not in the other's.
    logs = {n: _log_bytes(data / "__nodes" / str(n) / "__consumer_offsets-0") for n in (0, 1)}
    assert CONSUMER_GROUP.encode() in logs[home]
    assert CONSUMER_GROUP.encode() not in logs[1 - home]
    kill_9(broker, nodes, home)
    again = Consumer({"bootstrap.servers": bootstrap, "group.id": CONSUMER_GROUP, **QUIET})
    assert [tp.offset for tp in again.committed(wanted, 30)] == ends
    again.close()


def _log_bytes(directory: Path) -> bytes:
    return b"".join(f.read_bytes() for f in sorted(directory.glob("*.log")))


def test_no_file_under_the_data_dir_is_open_in_two_processes(tmp_path: Path) -> None:
    """Each process has its partitions' segments, its own lock and internal logs open; no file
    (nor lock) is open in both: they share the data dir's layout and nothing else."""
    data = tmp_path / "data"
    broker, nodes = start_two(data)
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS, timeout=30)
        set_group_configs(broker.bootstrap, SHARE_GROUP, {"share.auto.offset.reset": "earliest"})
        p = Producer({"bootstrap.servers": broker.bootstrap, **QUIET})
        for i in range(40):
            p.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS)
        assert p.flush(30) == 0
        c = share_consumer(broker.bootstrap, SHARE_GROUP)
        c.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + 60
        while got < 40 and time.monotonic() < deadline:
            got += len(poll_records(c, 0.3))
        c.close()
        assert got >= 40
        root = data.resolve()
        open_files = {node: _open_under(pid, root) for node, pid in nodes.items()}
        for node, files in open_files.items():
            assert root / "__nodes" / str(node) / ".lock" in files
            assert sum(1 for f in files if f.parent.name.startswith(f"{TOPIC}-")) == 2
        assert not open_files[0] & open_files[1], open_files[0] & open_files[1]
    finally:
        broker.stop(60)


def _open_under(pid: int, root: Path) -> set[Path]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = Path(os.readlink(fd))
        except OSError:
            continue
        if target.is_relative_to(root):
            found.add(target)
    return found


def test_the_readme_block_runs_as_written(tmp_path: Path) -> None:
    """README's "Every core" shell block, in an empty directory whose `.venv` is this
    interpreter's; only the ports change (9192/9408 may be taken on a shared machine)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Every core: `--processes N`\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    port = free_ports(2)
    metrics = free_ports(2, avoid=frozenset((port, port + 1)))
    for old, new in (("9192", port), ("9193", port + 1), ("9408", metrics), ("9409", metrics + 1)):
        block = block.replace(old, str(new))
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    # Output to files, not pipes, and a session of its own: if a line fails, `bash -e` exits
    # while the backgrounded supervisor lives on; it would hold pipes open (run() waiting the
    # whole timeout for their end) and outlive the test. Its group is killed either way.
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        bash = subprocess.Popen(
            ["bash", "-e", "-c", block], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=stdout, stderr=stderr, start_new_session=True,
        )  # fmt: skip
        try:
            code: int | None = bash.wait(timeout=240)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(bash.pid, signal.SIGKILL)
            bash.wait()
    printed, logged = out.read_text(), err.read_text()
    assert code == 0, f"exit {code}:\n{printed[-3000:]}\n{logged[-5000:]}"
    leaders = re.findall(r"Partition: \d+\tLeader: (\d+)", printed)
    assert sorted(set(leaders)) == ["0", "1"] and len(leaders) == 4, printed
    assert int(printed.strip().splitlines()[-1]) > 0  # node 1's metrics answered
    assert '"stopped"' in logged or "stopped" in logged
