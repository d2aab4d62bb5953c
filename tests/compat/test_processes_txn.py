"""Transactions across the processes of `shoal serve --processes 2` (issue 33), with
confluent-kafka's unchanged transactional producer and read_committed consumers.

A transaction's coordinator is the process its transactional id hashes to; its partitions are
led by both. As in a Kafka cluster of two brokers: the leader of a partition verifies a
transactional batch with the coordinator (AddPartitionsToTxn v4+ `verifyOnly`, KIP-890,
`AddPartitionsToTxnManager`), and the coordinator has every leader write its markers
(WriteTxnMarkers, `TransactionMarkerChannelManager`, retried until written).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import TopicPartition

from client.cluster import Cluster
from client.errors import KafkaError as ClientError
from client.transactions import describe_transactions
from tests.brokers import listens
from tests.brokers import node_pids
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.test_processes import kill_9
from tests.compat.test_processes import start_two

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC, PARTITIONS = "ledger", 4


def _node(key: str) -> int:
    return zlib.crc32(key.encode()) % 2


def _txn_id(coordinator: int) -> str:
    """A transactional id whose coordinator is node `coordinator`."""
    return next(f"txn-{i}" for i in range(100) if _node(f"txn-{i}") == coordinator)


def _leaders(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "meta", **QUIET})
    topics = c.list_topics(TOPIC, timeout=20).topics
    c.close()
    return {p: m.leader for p, m in topics[TOPIC].partitions.items()}


def _ends(bootstrap: str) -> dict[str, list[int]]:
    """Each partition's end for read_committed (the last stable offset) and read_uncommitted
    (the high watermark)."""
    ends = {}
    for level in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": level,
                      **QUIET})  # fmt: skip
        ends[level] = [
            c.get_watermark_offsets(TopicPartition(TOPIC, p), 20)[1] for p in range(PARTITIONS)
        ]
        c.close()
    return ends


def _read(bootstrap: str, level: str, done: Callable[[dict[int, list[bytes]]], bool],
          timeout: float = 60) -> dict[int, list[bytes]]:  # fmt: skip
    """Each partition's values from offset 0 at `level`, read until `done` says so (or the
    deadline: the caller's assertion then says what was missing)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{level}",
                  "isolation.level": level, **QUIET})  # fmt: skip
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                seen[m.partition()].append(m.value())
    c.close()
    return seen


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                  **QUIET})  # fmt: skip
    p.init_transactions(60)
    return p


def _send(p: Producer, prefix: str, count: int) -> dict[int, list[bytes]]:
    """`count` records spread over every partition, flushed (acknowledged); what each got."""
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(count):
        value = b"%s-%d" % (prefix.encode(), i)
        p.produce(TOPIC, value=value, partition=i % PARTITIONS)
        sent[i % PARTITIONS].append(value)
    assert p.flush(60) == 0
    return sent


def _open_transaction(bootstrap: str) -> tuple[str, Producer, dict[int, list[bytes]]]:
    """The topic made, a transaction coordinated by node 0 begun, and 8 records a partition
    sent in it and acknowledged: its id, its producer and what each partition got."""
    create_topic(bootstrap, TOPIC, PARTITIONS, timeout=30)
    txn_id = _txn_id(0)
    p = _transactional(bootstrap, txn_id)
    p.begin_transaction()
    return txn_id, p, _send(p, "kept", 8 * PARTITIONS)


def _state(bootstrap: str, txn_id: str) -> str:
    async def ask() -> str:
        cluster = Cluster(bootstrap, client_id="txn-test")
        try:
            found = (await describe_transactions(cluster, [txn_id]))[txn_id]
        finally:
            await cluster.close()
        return getattr(found, "state", "?")

    return asyncio.run(ask())


@pytest.mark.parametrize("coordinator", [0, 1])
def test_a_transaction_across_both_processes_commits_whole_and_an_abort_leaves_none(
    tmp_path: Path, coordinator: int
) -> None:
    """Partitions led by both processes, the coordinator either one: a committed transaction
    is seen whole and in order by read_committed, an aborted one not at all (read_uncommitted
    sees its records), and every partition's last stable offset reaches its high watermark
    (both processes wrote the markers). Before this was built the leader that is not the
    coordinator refused the batches (INVALID_PRODUCER_ID_MAPPING) and commit failed."""
    broker, _ = start_two(tmp_path / "data")
    try:
        b = broker.bootstrap
        create_topic(b, TOPIC, PARTITIONS, timeout=30)
        assert set(_leaders(b).values()) == {0, 1}
        p = _transactional(b, _txn_id(coordinator))
        committed: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
        aborted: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
        for prefix, commit in (("one", True), ("gone", False), ("two", True)):
            p.begin_transaction()
            sent = _send(p, prefix, 4 * PARTITIONS)
            if commit:
                p.commit_transaction(60)
            else:
                p.abort_transaction(60)
            for q, values in sent.items():
                (committed if commit else aborted)[q].extend(values)
        ends = _ends(b)
        assert ends["read_committed"] == ends["read_uncommitted"], ends
        want = sum(map(len, committed.values()))
        seen = _read(b, "read_committed", lambda s: sum(map(len, s.values())) >= want)
        assert seen == committed
        everything = want + sum(map(len, aborted.values()))
        raw = _read(b, "read_uncommitted", lambda s: sum(map(len, s.values())) >= everything)
        assert {q: sorted(v) for q, v in raw.items()} == {
            q: sorted(committed[q] + aborted[q]) for q in range(PARTITIONS)
        }
        assert _state(b, _txn_id(coordinator)) == "CompleteCommit"
    finally:
        broker.stop(60)


def test_a_leader_killed_before_it_wrote_the_marker_gets_it_after_its_restart(
    tmp_path: Path,
) -> None:
    """kill -9 of the process leading half the transaction's partitions after its batches
    were acknowledged and before the commit: the coordinator writes PrepareCommit, answers
    the commit (Kafka answers EndTxn once the decision is written), and sends the markers
    again until the restarted leader writes them (`TransactionMarkerChannelManager` retries):
    the transaction completes, read_committed sees every acknowledged record, and the last
    stable offsets reach the high watermarks. No open transaction is left."""
    broker, nodes = start_two(tmp_path / "data")
    try:
        b = broker.bootstrap
        txn_id, p, sent = _open_transaction(b)
        os.kill(nodes[1], 9)  # the coordinator (node 0) commits while node 1 is down
        p.commit_transaction(120)
        wait_for_nodes(broker, 2, timeout=90, not_pids={nodes[1]})
        deadline = time.monotonic() + 90
        while _state(b, txn_id) != "CompleteCommit":
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.2)
        ends = _ends(b)
        assert ends["read_committed"] == ends["read_uncommitted"], ends
        want = sum(map(len, sent.values()))
        assert _read(b, "read_committed", lambda s: sum(map(len, s.values())) >= want) == sent
    finally:
        broker.stop(60)


def _state_when_up(bootstrap: str, txn_id: str) -> str | None:
    """The transaction's state, None while its coordinator does not answer."""
    try:
        return _state(bootstrap, txn_id)
    except (OSError, ConnectionError, TimeoutError, KafkaException, ClientError):
        return None


def test_a_coordinator_killed_between_prepare_and_complete_finishes_after_its_restart(
    tmp_path: Path,
) -> None:
    """kill -9 of the coordinator while the transaction is PrepareCommit: the other leader is
    stopped (SIGSTOP) so that its marker cannot be written and the transaction stays prepared;
    the coordinator is killed there, the leader resumed. The restarted coordinator reads
    PrepareCommit from its `__transaction_state` and sends the markers again, as Kafka's
    `TransactionStateManager` loading hands prepared transactions to the marker channel: the
    transaction completes, the producer's commit succeeds (its EndTxn retried on
    CONCURRENT_TRANSACTIONS), read_committed sees every acknowledged record and the last
    stable offsets reach the high watermarks."""
    broker, nodes = start_two(tmp_path / "data")
    stopped = False
    try:
        b = broker.bootstrap
        txn_id, p, sent = _open_transaction(b)
        os.kill(nodes[1], signal.SIGSTOP)
        stopped = True
        failures: list[BaseException] = []

        def commit() -> None:
            try:
                p.commit_transaction(180)
            except BaseException as e:  # the assertion below reports it
                failures.append(e)

        committer = threading.Thread(target=commit, daemon=True)
        committer.start()
        deadline = time.monotonic() + 60
        while _state_when_up(b, txn_id) != "PrepareCommit":
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.05)
        os.kill(nodes[0], 9)
        # Node 0 alone: the stopped node 1 accepts no connection, and probing its port would
        # fill its listen backlog.
        deadline = time.monotonic() + 120
        while node_pids(broker).get(0) in (None, nodes[0]) or not listens(broker.port):
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.1)
        os.kill(nodes[1], signal.SIGCONT)
        stopped = False
        deadline = time.monotonic() + 90
        while _state_when_up(b, txn_id) != "CompleteCommit":
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.2)
        committer.join(180)
        assert not committer.is_alive() and not failures, failures
        ends = _ends(b)
        assert ends["read_committed"] == ends["read_uncommitted"], ends
        want = sum(map(len, sent.values()))
        assert _read(b, "read_committed", lambda s: sum(map(len, s.values())) >= want) == sent
    finally:
        if stopped:
            os.kill(nodes[1], signal.SIGCONT)
        broker.stop(60)


def _group(coordinator: int) -> str:
    return next(f"copier-{i}" for i in range(100) if _node(f"copier-{i}") == coordinator)


def _committed(bootstrap: str, group: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    return [tp.offset for tp in got]


def test_send_offsets_to_transaction_for_a_group_coordinated_by_the_other_process(
    tmp_path: Path,
) -> None:
    """`send_offsets_to_transaction` with the group's coordinator the other process: that
    process verifies the TxnOffsetCommit with the transaction's coordinator and stages the
    offsets in its own offsets log (Kafka's group coordinator writes them as transactional
    records of the producer); the transaction's marker there makes them committed on COMMIT
    and drops them on ABORT. Both survive a kill -9 of the group's coordinator (replayed from
    its log: staged batches, then their marker). Before this was built the group coordinator
    did not know the transactional id (INVALID_PRODUCER_ID_MAPPING)."""
    broker, nodes = start_two(tmp_path / "data")
    try:
        b = broker.bootstrap
        create_topic(b, TOPIC, PARTITIONS, timeout=30)
        group = _group(1)
        p = _transactional(b, _txn_id(0))
        meta = Consumer({"bootstrap.servers": b, "group.id": group, **QUIET})
        metadata = meta.consumer_group_metadata()

        def offsets(base: int) -> list[TopicPartition]:
            return [TopicPartition(TOPIC, q, base + q) for q in range(PARTITIONS)]

        p.begin_transaction()
        _send(p, "out", PARTITIONS)
        p.send_offsets_to_transaction(offsets(10), metadata, 60)
        p.commit_transaction(60)
        assert _committed(b, group) == [10, 11, 12, 13]
        p.begin_transaction()
        _send(p, "dropped", PARTITIONS)
        p.send_offsets_to_transaction(offsets(20), metadata, 60)
        p.abort_transaction(60)
        assert _committed(b, group) == [10, 11, 12, 13]
        meta.close()
        kill_9(broker, nodes, 1)
        assert _committed(b, group) == [10, 11, 12, 13]
    finally:
        broker.stop(60)
