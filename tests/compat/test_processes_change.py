"""Changing `shoal serve --processes N` loses nothing (issue 33; docs/multicore.md, "Changing N").

One data dir served by 1, then 2, then 1, then 3 processes, with confluent-kafka's unchanged
clients. A Kafka cluster that gains brokers keeps every group's committed offsets and every
transactional id's state: the partitions of `__consumer_offsets` and `__transaction_state`
move to their new leaders, which load them (`GroupMetadataManager.loadGroupsAndOffsets`,
`TransactionStateManager.loadTransactionsForTxnTopicPartition`) and complete or abort what was
pending (`TransactionCoordinator.onElection`); producer ids come from the controller's
`ProducerIdControlManager`, never twice. Here the nodes' own files are rewritten for their new
owners before any node starts (`broker/node_migration.py`).
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
import zlib
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse

from client.cluster import Cluster
from client.transactions import TransactionDescription
from client.transactions import describe_transactions
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.probe import read_frame

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC, LEDGER, JOBS, PARTITIONS = "orders", "ledger", "jobs", 4
PER_PARTITION = 50


def _coordinator(key: str, processes: int) -> int:
    return zlib.crc32(key.encode()) % processes


def _key(prefix: str, node_of_two: int) -> str:
    """A group or transactional id whose coordinator with 2 processes is `node_of_two`."""
    return next(
        f"{prefix}-{i}" for i in range(100) if _coordinator(f"{prefix}-{i}", 2) == node_of_two
    )


MOVES, STAYS = _key("audit", 1), _key("audit", 0)  # consumer groups
TXN_ID = _key("txn", 1)  # its coordinator moves from the one process to node 1
SHARE_GROUP = _key("workers", 1)


def _start(
    data: Path, port: int, processes: int, env: dict[str, str] | None = None
) -> BrokerProcess:
    broker = configured_broker(data, SHORT_SESSION_CONFIG)
    broker.port = port
    broker.env = env or {}
    if processes > 1:
        broker.extra += ["--processes", str(processes)]
    broker.start(timeout=120)
    if processes > 1:
        wait_for_nodes(broker, processes, timeout=120)
    return broker


def _produce(bootstrap: str, topic: str, per_partition: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  **QUIET})  # fmt: skip
    for i in range(per_partition):
        for q in range(PARTITIONS):
            p.produce(topic, value=f"{tag}-{q}-{i}".encode(), partition=q)
    assert p.flush(60) == 0


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        tps = c.committed([TopicPartition(TOPIC, q) for q in range(PARTITIONS)], timeout=30)
    finally:
        c.close()
    return {tp.partition: max(tp.offset, 0) for tp in tps}


def _consume_some(bootstrap: str, group: str, start: dict[int, int], count: int) -> dict[int, int]:
    """A member of `group` reads `count` records and commits them: each partition's records
    must begin exactly at `start` (the group's committed offset: none skipped, none twice) and
    follow one another. Returns the group's committed offsets after."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", **QUIET})  # fmt: skip
    c.subscribe([TOPIC])
    seen: dict[int, list[int]] = {q: [] for q in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, seen.values())) < count and time.monotonic() < deadline:
            for m in c.consume(count - sum(map(len, seen.values())), 0.5):
                assert m.error() is None, m.error()
                seen[m.partition()].append(m.offset())
        assert sum(map(len, seen.values())) == count, seen
        for q, offsets in seen.items():
            assert offsets == list(range(start[q], start[q] + len(offsets))), (q, start, offsets)
        c.commit(asynchronous=False)
    finally:
        c.close()
    after = _committed(bootstrap, group)
    assert after == {q: start[q] + len(seen[q]) for q in range(PARTITIONS)}
    return after


def _describe(bootstrap: str, txn_id: str) -> TransactionDescription:
    async def ask() -> TransactionDescription:
        cluster = Cluster(bootstrap, client_id="change-test")
        try:
            found = (await describe_transactions(cluster, [txn_id]))[txn_id]
        finally:
            await cluster.close()
        assert isinstance(found, TransactionDescription), found
        return found

    return asyncio.run(ask())


def _wait_state(bootstrap: str, txn_id: str, state: str) -> TransactionDescription:
    deadline = time.monotonic() + 60
    while (found := _describe(bootstrap, txn_id)).state != state:
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    return found


def _read_committed(bootstrap: str, want: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "isolation.level": "read_committed", **QUIET})  # fmt: skip
    c.assign([TopicPartition(LEDGER, q, 0) for q in range(PARTITIONS)])
    seen: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while sum(map(len, seen.values())) < want and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                seen[m.partition()].append(m.value())
    c.close()
    return seen


def _stable_everywhere(bootstrap: str) -> bool:
    """Every ledger partition's last stable offset is its high watermark."""
    ends = {}
    for level in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends",
                      "isolation.level": level, **QUIET})  # fmt: skip
        ends[level] = [
            c.get_watermark_offsets(TopicPartition(LEDGER, q), 20)[1] for q in range(PARTITIONS)
        ]
        c.close()
    return ends["read_committed"] == ends["read_uncommitted"]


def _transactional(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID, "linger.ms": 5,
                  **QUIET})  # fmt: skip
    p.init_transactions(60)
    return p


def _send(p: Producer, tag: str, per_partition: int) -> None:
    for i in range(per_partition):
        for q in range(PARTITIONS):
            p.produce(LEDGER, value=f"{tag}-{i}".encode(), partition=q)
    assert p.flush(60) == 0


def _share_all(bootstrap: str, want: int) -> set[bytes]:
    c = share_consumer(bootstrap, SHARE_GROUP)
    c.subscribe([JOBS])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            for m in poll_records(c):
                assert m.value() not in got, m.value()
                got.add(m.value())
        # A little longer: nothing more may come (nothing acknowledged before comes again).
        quiet = time.monotonic() + 2
        while time.monotonic() < quiet:
            for m in poll_records(c):
                got.add(m.value())
    finally:
        c.close()  # acknowledges what it got
    return got


def _jobs(bootstrap: str, tag: str) -> set[bytes]:
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    values = {f"{tag}-{i}".encode() for i in range(20)}
    for i, v in enumerate(sorted(values)):
        p.produce(JOBS, value=v, partition=i % 2)
    assert p.flush(60) == 0
    return values


def test_groups_transactions_and_share_groups_survive_1_2_1_3_processes(tmp_path: Path) -> None:
    """N = 1 -> 2 -> 1 -> 3 on one data dir. Consumer groups (one whose coordinator moves to
    node 1, one that stays on node 0 with two processes) resume exactly at their committed
    offsets after each change. A transaction committed before the first change stays visible
    to read_committed; one left open at the stop is aborted by its new coordinator (node 1),
    which knows the id's producer id and epoch, so every partition's last stable offset
    reaches its high watermark and a new producer with the id fences the old epoch. A share
    group keeps what it acknowledged (it moves with the partitions) and its configs (node 0's
    files). Without the rewrite of the nodes' files, the groups under node 1 restart from
    `auto.offset.reset` and the transactional id is unknown to node 1, its open transaction
    holding the last stable offset back forever."""
    data, port = tmp_path / "data", free_ports(3)
    broker = _start(data, port, 1)
    old_txn: Producer | None = None
    try:
        b = broker.bootstrap
        create_topic(b, TOPIC, PARTITIONS, timeout=30)
        create_topic(b, LEDGER, PARTITIONS, timeout=30)
        create_topic(b, JOBS, 2, timeout=30)
        _produce(b, TOPIC, PER_PARTITION, "one")
        start = {q: 0 for q in range(PARTITIONS)}
        committed = {g: _consume_some(b, g, start, 60) for g in (MOVES, STAYS)}
        old_txn = _transactional(b)
        old_txn.begin_transaction()
        _send(old_txn, "kept", 5)
        old_txn.commit_transaction(60)
        old_txn.begin_transaction()
        _send(old_txn, "open", 3)  # acknowledged, then left open at the stop
        before = _describe(b, TXN_ID)
        assert before.state == "Ongoing"
        set_group_configs(b, SHARE_GROUP, {"share.auto.offset.reset": "earliest"})
        first_jobs = _jobs(b, "first")
        assert _share_all(b, len(first_jobs)) == first_jobs
        broker.stop(60)

        broker = _start(data, port, 2)
        assert {g: _committed(b, g) for g in (MOVES, STAYS)} == committed
        moved = _wait_state(b, TXN_ID, "CompleteAbort")
        assert (moved.coordinator_id, moved.producer_id) == (1, before.producer_id)
        assert moved.producer_epoch > before.producer_epoch  # fenced, as a timed-out abort
        deadline = time.monotonic() + 60
        while not _stable_everywhere(b):
            assert time.monotonic() < deadline, "a last stable offset stuck behind the open txn"
            time.sleep(0.2)
        kept = {q: [f"kept-{i}".encode() for i in range(5)] for q in range(PARTITIONS)}
        assert _read_committed(b, 5 * PARTITIONS) == kept
        again = _transactional(b)
        again.begin_transaction()
        _send(again, "after", 2)
        again.commit_transaction(60)
        after = _describe(b, TXN_ID)
        assert after.producer_id == before.producer_id
        assert after.producer_epoch > moved.producer_epoch
        want = {q: kept[q] + [f"after-{i}".encode() for i in range(2)] for q in range(PARTITIONS)}
        assert _read_committed(b, 7 * PARTITIONS) == want
        assert describe_group_configs(b, SHARE_GROUP)["share.auto.offset.reset"] == "earliest"
        second_jobs = _jobs(b, "second")
        assert _share_all(b, len(second_jobs)) == second_jobs  # none of the first again
        committed = {g: _consume_some(b, g, committed[g], 40) for g in (MOVES, STAYS)}
        broker.stop(60)

        broker = _start(data, port, 1)
        assert {g: _committed(b, g) for g in (MOVES, STAYS)} == committed
        committed = {g: _consume_some(b, g, committed[g], 20) for g in (MOVES, STAYS)}
        assert _describe(b, TXN_ID).producer_epoch == after.producer_epoch
        broker.stop(60)

        broker = _start(data, port, 3)
        assert {g: _committed(b, g) for g in (MOVES, STAYS)} == committed
        assert _describe(b, TXN_ID).coordinator_id == _coordinator(TXN_ID, 3)
        third_jobs = _jobs(b, "third")
        assert _share_all(b, len(third_jobs)) == third_jobs
    finally:
        broker.stop(60)
        del old_txn


def _new_producer_id(port: int) -> int:
    body = build(InitProducerIdRequest, transactional_id=None,
                 transaction_timeout=datetime.timedelta(minutes=1), producer_id=-1,
                 producer_epoch=-1)  # fmt: skip
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(frame(encode_request(body, 1, "ids")))
        _, answer = decode_response(body.__api_key__, body.__version__, read_frame(sock))
    assert isinstance(answer, InitProducerIdResponse) and answer.error_code == ErrorCode.none
    return int(answer.producer_id)


def test_no_producer_id_is_handed_out_twice_across_a_change(tmp_path: Path) -> None:
    """Ids handed out with one process (some never written with, as a producer that asked
    and died) are never handed out again by any node of two, then of one again; and an
    idempotent producer after each change has every record stored once. Without the change,
    the node of two that leads no partition holding the old ids starts its ids at `node + 0`
    (its own producer-ids file is new), handing out 0 or 1 again."""
    data, port = tmp_path / "data", free_ports(2)
    broker = _start(data, port, 1)
    try:
        b = broker.bootstrap
        create_topic(b, "one", 1, timeout=30)
        used = [_new_producer_id(port) for _ in range(3)]
        p = Producer({"bootstrap.servers": b, "enable.idempotence": True, **QUIET})
        for i in range(10):
            p.produce("one", value=b"before-%d" % i)
        assert p.flush(60) == 0
        broker.stop(60)
        for processes in (2, 1):
            broker = _start(data, port, processes)
            new = [_new_producer_id(port + n) for n in range(processes) for _ in range(3)]
            assert len(set(new)) == len(new) and min(new) > max(used), (used, new)
            used += new
            p = Producer({"bootstrap.servers": b, "enable.idempotence": True, **QUIET})
            for i in range(10):
                p.produce("one", value=b"after-%d-%d" % (processes, i))
            assert p.flush(60) == 0
            broker.stop(60)
        broker = _start(data, port, 1)
        c = Consumer({"bootstrap.servers": b, "group.id": "r", **QUIET})
        c.assign([TopicPartition("one", 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 30 and time.monotonic() < deadline:
            values += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
        c.close()
        assert values == [b"before-%d" % i for i in range(10)] + [
            b"after-%d-%d" % (n, i) for n in (2, 1) for i in range(10)
        ]
    finally:
        broker.stop(60)


# Every step is crashed at in tests/unit/test_node_migration.py; here one of the build and one
# of the switch, through the supervisor as a user runs it.
@pytest.mark.parametrize("step", ["ready", "moving-new"])
def test_a_kill_9_inside_the_change_then_a_restart_ends_the_same(tmp_path: Path, step: str) -> None:
    """The supervisor killed with SIGKILL at each step of the rewrite (`SHOAL_RESIZE_CRASH`),
    then started again: the groups' committed offsets and the transactional id are served by
    their new coordinators as after an uninterrupted change."""
    data, port = tmp_path / "data", free_ports(2)
    broker = _start(data, port, 1)
    try:
        b = broker.bootstrap
        create_topic(b, TOPIC, PARTITIONS, timeout=30)
        _produce(b, TOPIC, 10, "x")
        start = {q: 0 for q in range(PARTITIONS)}
        committed = {g: _consume_some(b, g, start, 12) for g in (MOVES, STAYS)}
        p = _transactional(b)
        create_topic(b, LEDGER, PARTITIONS, timeout=30)
        p.begin_transaction()
        _send(p, "kept", 1)
        p.commit_transaction(60)
        pid = _describe(b, TXN_ID).producer_id
        broker.stop(60)
        crashed = configured_broker(data, SHORT_SESSION_CONFIG)
        crashed.port = port
        crashed.extra += ["--processes", "2"]
        crashed.env = {"SHOAL_RESIZE_CRASH": step}
        with pytest.raises(RuntimeError, match="exited with -9"):
            crashed.start(timeout=120)
        assert (data / "__resize").exists()
        broker = _start(data, port, 2)
        assert not (data / "__resize").exists()
        assert {g: _committed(b, g) for g in (MOVES, STAYS)} == committed
        found = _describe(b, TXN_ID)
        assert (found.coordinator_id, found.producer_id, found.state) == (1, pid, "CompleteCommit")
        assert _read_committed(b, PARTITIONS) == {q: [b"kept-0"] for q in range(PARTITIONS)}
    finally:
        broker.stop(60)
