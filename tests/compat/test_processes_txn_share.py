"""Shoal's TxnShareAcknowledge across the processes of `shoal serve --processes 2` (issue 33).

A consume-transform-produce loop over a share group: a share consumer (Shoal's, explicit mode)
acquires records of `tasks`, whose two partitions are led one by each process; a transactional
producer (raw requests through Shoal's client, routed as Kafka's clients route them: the
transaction's requests to its coordinator, node 0, each batch to its partition's leader)
writes to `results`, also led by both, and stages the ACCEPTs of its inputs in the same
transaction, each share-partition's with its leader (KIP-1289's draft routes TxnShareAcknowledge
to the share-partition leader, as ShareAcknowledge). The leader that is not the coordinator
has the coordinator add its share-partitions (AddPartitionsToTxn v5, as a broker), and the
transaction's markers (WriteTxnMarkers) apply or release what it staged
(`broker/txn_share_remote.py`). Before this was built node 1 refused its share-partitions'
acknowledgements whole (INVALID_PRODUCER_ID_MAPPING: it did not coordinate the transaction).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11 import request as fetch_v11
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v10 import request as produce_v10

from client.admin import Admin
from client.cluster import Cluster
from client.records import AcquiredRange
from client.share_acks import AcknowledgeType
from client.share_consumer import ShareConsumer
from client.txn_share_acks import TxnShareAckError
from client.txn_share_acks import txn_share_acknowledge
from protocol.messages import build
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.support import set_group_configs

pytestmark = [pytest.mark.compat, pytest.mark.slow]

IN, OUT, PARTS, COUNT = "tasks", "results", 2, 10
MINUTE = datetime.timedelta(minutes=1)
ACCEPT = AcknowledgeType.ACCEPT


def _node(key: str) -> int:
    return zlib.crc32(key.encode()) % 2


TXN = next(f"step-{i}" for i in range(100) if _node(f"step-{i}") == 0)  # coordinator: node 0
GROUP = next(f"workers-{i}" for i in range(100) if _node(f"workers-{i}") == 0)


def _start(data: Path) -> tuple[BrokerProcess, dict[int, int]]:
    broker = configured_broker(data)
    broker.port = free_ports(2)
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    return broker, wait_for_nodes(broker, 2, timeout=90)


def _prepare(bootstrap: str) -> None:
    create_topic(bootstrap, IN, PARTS, timeout=30)
    create_topic(bootstrap, OUT, PARTS, timeout=30)
    set_group_configs(bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
    p = KafkaProducer({"bootstrap.servers": bootstrap, **QUIET})
    for part in range(PARTS):
        for i in range(COUNT):
            p.produce(IN, value=b"in-%d-%d" % (part, i), partition=part)
    assert p.flush(60) == 0


class Step:
    """A transactional producer by raw requests (Shoal's client has no transactional one)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.pid, self.epoch, self.seq = -1, -1, [0] * PARTS

    async def _leader(self, topic: str, partition: int) -> int:
        return (await self.cluster.topic(topic)).partitions[partition].leader_id

    async def init(self) -> None:
        deadline = time.monotonic() + 60
        while True:  # an open transaction is aborted first: retried, as clients do
            answer = await self.cluster.request(build(
                InitProducerIdRequest, transactional_id=TXN, producer_id=-1, producer_epoch=-1,
                transaction_timeout=MINUTE,
            ), node_id=_node(TXN))  # fmt: skip
            if answer.error_code != ErrorCode.concurrent_transactions:
                break
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert answer.error_code == ErrorCode.none
        self.pid, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
        self.seq = [0] * PARTS

    async def produce(self, value: bytes) -> None:
        """`value` to every partition of `results`."""
        topic = build(add_v3.AddPartitionsToTxnTopic, name=OUT, partitions=tuple(range(PARTS)))
        added = await self.cluster.request(build(
            add_v3.AddPartitionsToTxnRequest, v3_and_below_transactional_id=TXN,
            v3_and_below_producer_id=self.pid, v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=(topic,),
        ), node_id=_node(TXN))  # fmt: skip
        codes = {r.partition_error_code for t in added.results_by_topic_v3_and_below
                 for r in t.results_by_partition}  # fmt: skip
        assert codes == {ErrorCode.none}
        for part in range(PARTS):
            records = build_batch(
                [(None, value)], timestamp_ms=1, producer_id=self.pid, producer_epoch=self.epoch,
                base_sequence=self.seq[part], attributes=TRANSACTIONAL_MASK,
            )  # fmt: skip
            self.seq[part] += 1
            data = build(produce_v10.PartitionProduceData, index=part, records=records)
            tdata = build(produce_v10.TopicProduceData, name=OUT, partition_data=(data,))
            deadline = time.monotonic() + 30
            while True:  # a new topic reaches the other process a moment later: retried
                answer = await self.cluster.request(build(
                    produce_v10.ProduceRequest, transactional_id=TXN, acks=-1,
                    timeout=datetime.timedelta(seconds=30), topic_data=(tdata,),
                ), node_id=await self._leader(OUT, part))  # fmt: skip
                code = answer.responses[0].partition_responses[0].error_code
                if code != ErrorCode.unknown_topic_or_partition or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert code == ErrorCode.none

    async def ack(
        self, member_id: str, ranges: dict[int, tuple[int, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        return await txn_share_acknowledge(
            self.cluster, TXN, self.pid, self.epoch, GROUP, member_id,
            {(IN, part): [(first, last, ACCEPT)] for part, (first, last) in ranges.items()},
        )  # fmt: skip

    async def end(self, commit: bool) -> ErrorCode:
        """EndTxn, retried while CONCURRENT_TRANSACTIONS or COORDINATOR_LOAD_IN_PROGRESS (as
        clients do)."""
        deadline = time.monotonic() + 90
        while True:
            try:
                answer = await self.cluster.request(build(
                    EndTxnRequest, transactional_id=TXN, producer_id=self.pid,
                    producer_epoch=self.epoch, committed=commit,
                ), node_id=_node(TXN))  # fmt: skip
            except OSError:  # the coordinator restarted: a connection to its new process
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
                continue
            if answer.error_code not in (
                ErrorCode.concurrent_transactions,
                ErrorCode.coordinator_load_in_progress,
            ):
                return ErrorCode(answer.error_code)
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)


@asynccontextmanager
async def _cluster(bootstrap: str) -> AsyncIterator[Cluster]:
    cluster = Cluster(bootstrap, client_id="step")
    await cluster.bootstrap()
    try:
        yield cluster
    finally:
        await cluster.close()


async def _acquire(consumer: ShareConsumer, parts: int = PARTS) -> dict[int, AcquiredRange]:
    """Each partition's acquired range (one each: `COUNT` records a partition)."""
    got: dict[int, AcquiredRange] = {}
    deadline = time.monotonic() + 60
    while len(got) < parts and time.monotonic() < deadline:
        for data in await consumer.poll_acquired(0.5):
            for r in data.ranges:
                got[data.partition] = r
    return got


async def _start_offsets(bootstrap: str) -> list[int]:
    async with Admin(bootstrap) as admin:
        offsets = await admin.describe_share_group_offsets(GROUP, [(IN, p) for p in range(PARTS)])
    # (past every input once they are all acknowledged; the share state's own batches and the
    # markers are in the same logs, past the inputs)
    return [offsets[(IN, p)].start_offset for p in range(PARTS)]


def _read_committed(bootstrap: str, want: int) -> dict[int, list[bytes]]:
    """`results` as read_committed sees it, read until `want` records (or a deadline)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                  "isolation.level": "read_committed", **QUIET})  # fmt: skip
    c.assign([TopicPartition(OUT, p, 0) for p in range(PARTS)])
    seen: dict[int, list[bytes]] = {p: [] for p in range(PARTS)}
    deadline = time.monotonic() + 30
    while sum(map(len, seen.values())) < want and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            if m.error() is None:
                seen[m.partition()].append(m.value())
    c.close()
    return seen


async def _leaders(cluster: Cluster, topic: str) -> set[int]:
    return {p.leader_id for p in (await cluster.topic(topic)).partitions.values()}


async def test_a_loop_over_both_processes_commits_and_aborts_on_both(tmp_path: Path) -> None:
    """Inputs on both processes, outputs on both, coordinator node 0: an aborted transaction
    leaves every input to be delivered again (delivery count 2, on both share-partitions) and
    none of its output visible; a committed one ACCEPTs the inputs on both (their start
    offsets move past them) and read_committed sees its output on both partitions."""
    broker, _ = _start(tmp_path / "data")
    try:
        b = broker.bootstrap
        _prepare(b)
        async with (
            ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as consumer,
            _cluster(b) as cluster,
        ):  # fmt: skip
            assert await _leaders(cluster, IN) == {0, 1} == await _leaders(cluster, OUT)
            consumer.subscribe([IN])
            got = await _acquire(consumer)
            assert got == {p: AcquiredRange(0, COUNT - 1, 1) for p in range(PARTS)}
            step = Step(cluster)
            await step.init()
            everything = {p: (0, COUNT - 1) for p in range(PARTS)}

            await step.produce(b"gone")
            assert set((await step.ack(consumer.member_id, everything)).values()) == {
                ErrorCode.none
            }
            assert await step.end(commit=False) == ErrorCode.none
            again = await _acquire(consumer)
            assert again == {p: AcquiredRange(0, COUNT - 1, 2) for p in range(PARTS)}
            assert await _start_offsets(b) == [0, 0]

            await step.produce(b"kept")
            assert set((await step.ack(consumer.member_id, everything)).values()) == {
                ErrorCode.none
            }
            assert await step.end(commit=True) == ErrorCode.none
            assert min(await _start_offsets(b)) >= COUNT
            assert await _acquire(consumer, parts=1) == {}  # nothing left to deliver
            seen = await asyncio.to_thread(_read_committed, b, PARTS)
            assert seen == {p: [b"kept"] for p in range(PARTS)}
    finally:
        broker.stop(60)


async def test_a_fenced_producers_late_acknowledgements_apply_nowhere(tmp_path: Path) -> None:
    """A second producer with the same transactional id fences the first (its open
    transaction aborted: what it staged on both processes released). The first one's late
    TxnShareAcknowledge, to both leaders, is refused (PRODUCER_FENCED) and stages nothing:
    the member still holds those records and acknowledges them itself; its EndTxn is refused
    too. The new producer's transaction then commits on both."""
    broker, _ = _start(tmp_path / "data")
    try:
        b = broker.bootstrap
        _prepare(b)
        async with (
            ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as consumer,
            _cluster(b) as cluster,
        ):  # fmt: skip
            consumer.subscribe([IN])
            assert len(await _acquire(consumer)) == PARTS
            first, second = Step(cluster), Step(cluster)
            await first.init()
            await first.produce(b"first")
            half = {p: (0, COUNT // 2 - 1) for p in range(PARTS)}
            assert set((await first.ack(consumer.member_id, half)).values()) == {ErrorCode.none}
            await second.init()  # fences the first: its transaction aborted on both
            rest = {p: (COUNT // 2, COUNT - 1) for p in range(PARTS)}
            with pytest.raises(TxnShareAckError) as refused:
                await first.ack(consumer.member_id, rest)
            assert refused.value.error_code == ErrorCode.producer_fenced
            assert await first.end(commit=True) == ErrorCode.producer_fenced
            # Not staged: still the member's to acknowledge (RELEASE: delivered again).
            for p in range(PARTS):
                consumer.acknowledge_range(IN, p, COUNT // 2, COUNT - 1, AcknowledgeType.RELEASE)
            results = await consumer.commit_sync()
            assert {results[(IN, p)] for p in range(PARTS)} == {ErrorCode.none}
            assert await _start_offsets(b) == [0, 0]
            again = await _acquire(consumer)  # the first half released by the abort
            assert again == {p: AcquiredRange(0, COUNT - 1, 2) for p in range(PARTS)}
            everything = {p: (0, COUNT - 1) for p in range(PARTS)}
            await second.produce(b"second")
            assert set((await second.ack(consumer.member_id, everything)).values()) == {
                ErrorCode.none
            }
            assert await second.end(commit=True) == ErrorCode.none
            assert min(await _start_offsets(b)) >= COUNT
            seen = await asyncio.to_thread(_read_committed, b, PARTS)
            assert seen == {p: [b"second"] for p in range(PARTS)}
    finally:
        broker.stop(60)


async def test_kill_9_of_the_other_leader_before_end_txn_leaves_nothing_applied(
    tmp_path: Path,
) -> None:
    """kill -9 of node 1 (not the coordinator) after both leaders staged and before EndTxn:
    node 1's staged acknowledgements died with it, so the commit cannot keep its promise.
    Once the supervisor has restarted node 1, the coordinator asks it before deciding
    (TxnShareStaged), aborts the transaction and fences the producer (EndTxn answers
    PRODUCER_FENCED): none of its output is visible to read_committed, every input is
    delivered again on both processes and no share-partition's start offset moved."""
    broker, nodes = _start(tmp_path / "data")
    try:
        b = broker.bootstrap
        _prepare(b)
        async with _cluster(b) as cluster:
            step = Step(cluster)
            await step.init()
            everything = {p: (0, COUNT - 1) for p in range(PARTS)}
            async with ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as consumer:
                consumer.subscribe([IN])
                assert len(await _acquire(consumer)) == PARTS
                await step.produce(b"lost")
                assert set((await step.ack(consumer.member_id, everything)).values()) == {
                    ErrorCode.none
                }
            # (the member left: what the transaction staged is the transaction's, not its)
            leaders = [await step._leader(IN, p) for p in range(PARTS)]
            on_zero = leaders.index(0)
            os.kill(nodes[1], 9)
            wait_for_nodes(broker, 2, timeout=90, not_pids={nodes[1]})
            assert await step.end(commit=True) == ErrorCode.producer_fenced
            async with ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as fresh:
                fresh.subscribe([IN])
                again = await _acquire(fresh)
            assert {p: (r.first_offset, r.last_offset) for p, r in again.items()} == everything
            assert again[on_zero].delivery_count == 2  # node 0 released what it staged
            assert await _start_offsets(b) == [0, 0]
            for p in range(PARTS):  # the output: in an aborted transaction, markers written
                fetched = await _fetch_committed(cluster, await step._leader(OUT, p), p)
                assert fetched.last_stable_offset == fetched.high_watermark == 2
                assert [a.producer_id for a in fetched.aborted_transactions] == [step.pid]
    finally:
        broker.stop(60)


@pytest.mark.parametrize("staged_on", ["both", "node 1"])
async def test_kill_9_of_the_coordinator_before_end_txn_is_atomic(
    tmp_path: Path, staged_on: str
) -> None:
    """kill -9 of node 0, the transaction's coordinator (and a leader), after staging and
    before EndTxn. Staged on both leaders: node 0's part died with it, so at its restart it
    aborts the transaction and fences the producer, and node 1 releases its part: nothing
    applied, every input delivered again, the output aborted. Staged on node 1 alone: nothing
    was lost, the transaction survives the coordinator's restart and commits whole: node 1's
    inputs acknowledged, the output visible to read_committed on both partitions."""
    broker, nodes = _start(tmp_path / "data")
    try:
        b = broker.bootstrap
        _prepare(b)
        async with _cluster(b) as cluster:
            step = Step(cluster)
            await step.init()
            leaders = [await step._leader(IN, p) for p in range(PARTS)]
            on_one = leaders.index(1)
            everything = {p: (0, COUNT - 1) for p in range(PARTS)}
            staged = everything if staged_on == "both" else {on_one: everything[on_one]}
            async with ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as consumer:
                consumer.subscribe([IN])
                assert len(await _acquire(consumer)) == PARTS
                await step.produce(b"out")
                codes = await step.ack(consumer.member_id, staged)
                assert set(codes.values()) == {ErrorCode.none}
            os.kill(nodes[0], 9)
            wait_for_nodes(broker, 2, timeout=90, not_pids={nodes[0]})
            if staged_on == "both":
                assert await step.end(commit=True) == ErrorCode.producer_fenced
                async with ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as fresh:
                    fresh.subscribe([IN])
                    again = await _acquire(fresh)
                assert {p: (r.first_offset, r.last_offset) for p, r in again.items()} == everything
                assert await _start_offsets(b) == [0, 0]
                for p in range(PARTS):
                    fetched = await _fetch_committed(cluster, await step._leader(OUT, p), p)
                    assert [a.producer_id for a in fetched.aborted_transactions] == [step.pid]
            else:
                assert await step.end(commit=True) == ErrorCode.none
                # (node 0's share-partition, never acknowledged, restarts unstarted: -1)
                offsets = await _start_offsets(b)
                assert offsets[on_one] >= COUNT and offsets[1 - on_one] in (0, -1)
                async with ShareConsumer(b, GROUP, acknowledgement_mode="explicit") as fresh:
                    fresh.subscribe([IN])
                    again = await _acquire(fresh, parts=1)
                assert {p: (r.first_offset, r.last_offset) for p, r in again.items()} == {
                    1 - on_one: everything[1 - on_one]
                }
                seen = await asyncio.to_thread(_read_committed, b, PARTS)
                assert seen == {p: [b"out"] for p in range(PARTS)}
    finally:
        broker.stop(60)


async def _fetch_committed(cluster: Cluster, node: int, partition: int) -> Any:
    """A partition of `results` as a read_committed Fetch to its leader answers it."""
    part = build(fetch_v11.FetchPartition, partition=partition, fetch_offset=0,
                 partition_max_bytes=1 << 20)  # fmt: skip
    topic = build(fetch_v11.FetchTopic, topic=OUT, partitions=(part,))
    answer = await cluster.request(build(
        fetch_v11.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
        max_bytes=1 << 20, isolation_level=1, topics=(topic,),
    ), node_id=node)  # fmt: skip
    return answer.responses[0].partitions[0]
