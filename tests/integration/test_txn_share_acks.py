"""Share acknowledgements inside a transaction: Shoal's own TxnShareAcknowledge (after
KIP-1289's draft, apache/kafka#22357: the producer stages a member's acknowledgements, the
share-partition holds the records TX_PENDING for the producer id, the COMMIT marker applies
them as acknowledged, ABORT makes them AVAILABLE again with their delivery count kept).

A consume-transform-produce step: a share consumer (explicit mode) acquires records of `in`;
a transactional producer writes its output to `out` and stages the ACCEPTs of the inputs in the
same transaction, with raw requests through our client (InitProducerId, AddPartitionsToTxn,
Produce with a transactional batch, TxnShareAcknowledge, EndTxn)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11 import request as fetch_v11
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v10 import request as produce_v10

from broker.server import Server
from broker.share.record_state import RecordState
from broker.share.txn_acks import MAX_STAGED_RUNS
from broker.transactions import transaction_timeouts_now
from client.admin import Admin
from client.admin import ConfigResourceType
from client.cluster import Cluster
from client.producer import Producer
from client.records import AcquiredRange
from client.records import Record
from client.share_acks import AcknowledgeType
from client.share_consumer import ShareConsumer
from client.txn_share_acks import TxnShareAckError
from client.txn_share_acks import txn_share_acknowledge
from protocol.messages import build
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from protocol.shoal_apis import TXN_SHARE_ACKNOWLEDGE
from tests.brokers import BrokerProcess
from tests.clock import ManualClock

pytestmark = pytest.mark.integration

IN, OUT, GROUP, TXN = "in", "out", "pipeline", "step"
ACCEPT = AcknowledgeType.ACCEPT


class Txn:
    """One transactional producer driven by raw requests (Shoal's client has no
    transactional producer)."""

    def __init__(self, cluster: Cluster, timeout_ms: int = 60_000) -> None:
        self.cluster, self.timeout_ms = cluster, timeout_ms
        self.pid, self.epoch, self.seq = -1, -1, 0

    async def call(self, body: Any) -> Any:
        return await self.cluster.request(body)

    async def init(self) -> None:
        answer = await self.call(build(
            InitProducerIdRequest, transactional_id=TXN, producer_id=-1, producer_epoch=-1,
            transaction_timeout=datetime.timedelta(milliseconds=self.timeout_ms),
        ))  # fmt: skip
        assert answer.error_code == ErrorCode.none
        self.pid, self.epoch, self.seq = int(answer.producer_id), int(answer.producer_epoch), 0

    async def produce(self, values: list[bytes]) -> None:
        topic = build(add_v3.AddPartitionsToTxnTopic, name=OUT, partitions=(0,))
        added = await self.call(build(
            add_v3.AddPartitionsToTxnRequest, v3_and_below_transactional_id=TXN,
            v3_and_below_producer_id=self.pid, v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=(topic,),
        ))  # fmt: skip
        codes = [
            r.partition_error_code
            for t in added.results_by_topic_v3_and_below
            for r in t.results_by_partition
        ]
        assert codes == [ErrorCode.none]
        records = build_batch(
            [(None, v) for v in values], timestamp_ms=1, producer_id=self.pid,
            producer_epoch=self.epoch, base_sequence=self.seq, attributes=TRANSACTIONAL_MASK,
        )  # fmt: skip
        self.seq += len(values)
        data = build(produce_v10.PartitionProduceData, index=0, records=records)
        tdata = build(produce_v10.TopicProduceData, name=OUT, partition_data=(data,))
        answer = await self.call(build(
            produce_v10.ProduceRequest, transactional_id=TXN, acks=-1,
            timeout=datetime.timedelta(seconds=10), topic_data=(tdata,),
        ))  # fmt: skip
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none

    async def ack(self, member_id: str, first: int, last: int) -> ErrorCode:
        codes = await txn_share_acknowledge(
            self.cluster, TXN, self.pid, self.epoch, GROUP, member_id,
            {(IN, 0): [(first, last, ACCEPT)]},
        )  # fmt: skip
        return codes[(IN, 0)]

    async def end(self, commit: bool) -> ErrorCode:
        answer = await self.call(build(
            EndTxnRequest, transactional_id=TXN, producer_id=self.pid,
            producer_epoch=self.epoch, committed=commit,
        ))  # fmt: skip
        return ErrorCode(answer.error_code)


async def read_committed(cluster: Cluster) -> Any:
    """`out`'s partition as a read_committed Fetch answers it."""
    partition = build(fetch_v11.FetchPartition, partition=0, fetch_offset=0,
                      partition_max_bytes=1 << 20)  # fmt: skip
    topic = build(fetch_v11.FetchTopic, topic=OUT, partitions=(partition,))
    answer = await cluster.request(build(
        fetch_v11.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
        max_bytes=1 << 20, isolation_level=1, topics=(topic,),
    ))  # fmt: skip
    return answer.responses[0].partitions[0]


@asynccontextmanager
async def connected(bootstrap: str) -> AsyncIterator[Cluster]:
    cluster = Cluster(bootstrap, client_id="txn")
    await cluster.bootstrap()
    try:
        yield cluster
    finally:
        await cluster.close()


async def prepare(bootstrap: str, count: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(IN, 1)
        await admin.create_topic(OUT, 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        await producer.send_batch(IN, 0, [Record(b"in-%d" % i) for i in range(count)])


async def acquire(consumer: ShareConsumer, tries: int = 30) -> tuple[AcquiredRange, ...]:
    for _ in range(tries):
        got = await consumer.poll_acquired(0.3)
        if got:
            return got[0].ranges
    return ()


@asynccontextmanager
async def acquired_inputs(
    bootstrap: str, count: int
) -> AsyncIterator[tuple[ShareConsumer, Cluster]]:
    """The step's start: `count` records in `in`, acquired (first delivery) by a share
    consumer in explicit mode; and a connection for the transactional producer."""
    await prepare(bootstrap, count)
    async with (
        ShareConsumer(bootstrap, GROUP, acknowledgement_mode="explicit") as consumer,
        connected(bootstrap) as cluster,
    ):  # fmt: skip
        consumer.subscribe([IN])
        assert await acquire(consumer) == (AcquiredRange(0, count - 1, 1),)
        yield consumer, cluster


def state(broker: Server, offset: int) -> tuple[RecordState, int]:
    s = broker.services
    info = s.logs.topic(IN)
    assert info is not None
    sp = s.share_partitions.loaded(GROUP, info.topic_id, 0)
    assert sp is not None
    return sp.state_of(offset)


async def test_commit_accepts_the_staged_records_and_abort_releases_them(
    broker: Server, clock: ManualClock
) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with acquired_inputs(bootstrap, 10) as (consumer, cluster):
        txn = Txn(cluster)
        await txn.init()
        await txn.produce([b"out-a", b"out-b"])
        # Another member's id holds nothing: refused, nothing staged.
        assert await txn.ack(str(uuid.uuid4()), 0, 9) == ErrorCode.invalid_record_state
        assert await txn.ack(consumer.member_id, 0, 9) == ErrorCode.none
        # TX_PENDING: the member no longer holds them, and lock expiry does not release them.
        consumer.acknowledge_range(IN, 0, 0, 9, AcknowledgeType.RELEASE)
        results = await consumer.commit_sync()
        assert results[(IN, 0)] == ErrorCode.invalid_record_state
        clock.advance(35_000)  # past share.record.lock.duration.ms (30 s), within the txn's 60 s
        broker.services.share_partitions.expire_locks(clock.now_ms())
        assert state(broker, 0) == (RecordState.ACQUIRED, 1)

        assert await txn.end(commit=False) == ErrorCode.none
        assert state(broker, 0) == (RecordState.AVAILABLE, 1)  # delivery count kept
        aborted = await read_committed(cluster)
        assert [a.producer_id for a in aborted.aborted_transactions] == [txn.pid]

        assert await acquire(consumer) == (AcquiredRange(0, 9, 2),)
        await txn.produce([b"out-c"])
        assert await txn.ack(consumer.member_id, 0, 9) == ErrorCode.none
        assert await txn.end(commit=True) == ErrorCode.none
        assert state(broker, 0)[0] is not RecordState.AVAILABLE  # SPSO moved past them
        assert await acquire(consumer, tries=3) == ()  # (markers and share state: not data)
        committed = await read_committed(cluster)
        assert committed.last_stable_offset == committed.high_watermark


async def test_the_transaction_timeout_aborts_and_releases(
    broker: Server, clock: ManualClock
) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with acquired_inputs(bootstrap, 3) as (consumer, cluster):
        txn = Txn(cluster, timeout_ms=10_000)
        await txn.init()
        assert await txn.ack(consumer.member_id, 0, 2) == ErrorCode.none
        clock.advance(11_000)
        transaction_timeouts_now(broker.services.transactions, clock.now_ms())
        assert state(broker, 0) == (RecordState.AVAILABLE, 1)
        assert await txn.end(commit=True) == ErrorCode.producer_fenced


async def test_api_versions_does_not_list_shoal_apis(broker: Server) -> None:
    async with connected(f"127.0.0.1:{broker.port}") as cluster:
        answer = await cluster.request(build(
            ApiVersionsRequest, client_software_name="probe", client_software_version="1",
        ))  # fmt: skip
        keys = {int(k.api_key) for k in answer.api_keys}
        assert TXN_SHARE_ACKNOWLEDGE not in keys and 0 in keys
        with pytest.raises(TxnShareAckError) as refused:
            await txn_share_acknowledge(cluster, TXN, 1, 0, GROUP, str(uuid.uuid4()), {})
        assert refused.value.error_code == ErrorCode.invalid_producer_id_mapping


@pytest.mark.parametrize("crash", ["before EndTxn", "after COMMIT"])
async def test_kill_9_keeps_the_outcome(tmp_path: Path, crash: str) -> None:
    """kill -9 with the acknowledgements staged: at the restart the transaction is aborted
    (its staged acknowledgements were in memory), its output is invisible to read_committed
    and the records are acquirable again; after an answered COMMIT, the output is visible and
    the records are never delivered again."""
    data = tmp_path / "data"
    proc = BrokerProcess(data)
    proc.start()
    try:
        async with acquired_inputs(proc.bootstrap, 5) as (consumer, cluster):
            txn = Txn(cluster)
            await txn.init()
            await txn.produce([b"out-a", b"out-b"])
            assert await txn.ack(consumer.member_id, 0, 4) == ErrorCode.none
            if crash == "after COMMIT":
                assert await txn.end(commit=True) == ErrorCode.none
        # The member left (closing): records staged in the open transaction stay its own.
        proc.kill()
    finally:
        proc.kill()
    proc = BrokerProcess(data, port=proc.port)
    proc.start()
    try:
        async with (
            ShareConsumer(proc.bootstrap, GROUP, acknowledgement_mode="explicit") as consumer,
            connected(proc.bootstrap) as cluster,
        ):  # fmt: skip
            out = await read_committed(cluster)
            assert out.last_stable_offset == out.high_watermark == 3  # 2 records + the marker
            consumer.subscribe([IN])
            txn.cluster = cluster  # the producer, connected to the restarted broker
            if crash == "before EndTxn":
                assert [a.producer_id for a in out.aborted_transactions] == [txn.pid]
                assert await txn.end(commit=True) == ErrorCode.producer_fenced
                assert await acquire(consumer) == (AcquiredRange(0, 4, 1),)
            else:
                assert out.aborted_transactions == ()
                assert await acquire(consumer, tries=5) == ()
    finally:
        proc.kill()


async def test_a_transaction_stages_a_bounded_number_of_runs(broker: Server) -> None:
    """The marker applies a transaction's staged runs in one go on the loop: more than
    MAX_STAGED_RUNS are refused (INVALID_REQUEST), before any record is looked at."""
    bootstrap = f"127.0.0.1:{broker.port}"
    await prepare(bootstrap, 1)
    async with connected(bootstrap) as cluster:
        txn = Txn(cluster)
        await txn.init()
        kinds = (AcknowledgeType.ACCEPT, AcknowledgeType.REJECT)
        runs = [(i, i, kinds[i % 2]) for i in range(MAX_STAGED_RUNS + 1)]
        member = str(uuid.uuid4())
        codes = await txn_share_acknowledge(
            cluster, TXN, txn.pid, txn.epoch, GROUP, member, {(IN, 0): runs}
        )
        assert codes == {(IN, 0): ErrorCode.invalid_request}
        codes = await txn_share_acknowledge(
            cluster, TXN, txn.pid, txn.epoch, GROUP, member, {(IN, 0): runs[:-1]}
        )
        assert codes == {(IN, 0): ErrorCode.invalid_record_state}  # within the bound


async def test_a_fencing_producer_releases_the_staged_records(broker: Server) -> None:
    """A second producer with the same transactional id fences the first: its open transaction
    aborts (Kafka answers the newcomer CONCURRENT_TRANSACTIONS until it is done), and the
    records it staged are AVAILABLE again."""
    bootstrap = f"127.0.0.1:{broker.port}"
    async with acquired_inputs(bootstrap, 4) as (consumer, cluster):
        zombie = Txn(cluster)
        await zombie.init()
        assert await zombie.ack(consumer.member_id, 0, 3) == ErrorCode.none
        answer = await cluster.request(build(
            InitProducerIdRequest, transactional_id=TXN, producer_id=-1, producer_epoch=-1,
            transaction_timeout=datetime.timedelta(minutes=1),
        ))  # fmt: skip
        assert answer.error_code == ErrorCode.concurrent_transactions
        assert state(broker, 0) == (RecordState.AVAILABLE, 1)
        assert await zombie.end(commit=True) == ErrorCode.producer_fenced
        assert await acquire(consumer) == (AcquiredRange(0, 3, 2),)
