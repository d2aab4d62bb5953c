"""Transactions on the wire, raw requests over a real socket: what a partition answers a
transactional batch its transaction did not add (KIP-890 part 1: INVALID_TXN_STATE up to
Produce v10, TRANSACTION_ABORTABLE from v11, as Kafka 4's `AddPartitionsToTxnManager`
`produceRequestVersionToTransactionSupportedOperation`), the brokers' verify-only
AddPartitionsToTxn v5, and a read_committed Fetch and ListOffsets around an open and an aborted
transaction (the LSO and the aborted transactions of KIP-98)."""

from __future__ import annotations

import asyncio
import datetime
import socket
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v3 import request as add_offsets
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.add_partitions_to_txn.v5 import request as add_v5
from kio.schema.describe_producers.v0 import request as describe_producers
from kio.schema.describe_transactions.v0 import request as describe_txn
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11 import request as fetch_v11
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v5 import request as list_v5
from kio.schema.list_transactions.v1 import request as list_txn
from kio.schema.offset_fetch.v7 import request as offset_fetch
from kio.schema.produce.v10 import request as produce_v10
from kio.schema.produce.v11 import request as produce_v11
from kio.schema.txn_offset_commit.v3 import request as txn_commit

from broker.server import Server
from protocol.framing import frame
from protocol.messages import RequestPayload
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from tests.probe import read_frame

pytestmark = pytest.mark.integration

TOPIC, TXN = "ledger", "wire-txn"
MINUTE = datetime.timedelta(minutes=1)


def call(sock: socket.socket, body: RequestPayload) -> Any:
    sock.sendall(frame(encode_request(body, 1, "wire")))
    return decode_response(body.__api_key__, body.__version__, read_frame(sock))[1]


def produce(sock: socket.socket, module: Any, partition: int, pid: int, seq: int,
            txn_id: str | None = TXN) -> ErrorCode:  # fmt: skip
    records = build_batch(
        [(None, b"v%d" % seq)], timestamp_ms=1, producer_id=pid, producer_epoch=0,
        base_sequence=seq, attributes=TRANSACTIONAL_MASK,
    )  # fmt: skip
    data = build(module.PartitionProduceData, index=partition, records=records)
    topic = build(module.TopicProduceData, name=TOPIC, partition_data=(data,))
    answer = call(sock, build(module.ProduceRequest, transactional_id=txn_id, acks=-1,
                              timeout=MINUTE, topic_data=(topic,)))  # fmt: skip
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


def add(sock: socket.socket, pid: int, partitions: tuple[int, ...]) -> dict[int, ErrorCode]:
    topic = build(add_v3.AddPartitionsToTxnTopic, name=TOPIC, partitions=partitions)
    answer = call(sock, build(add_v3.AddPartitionsToTxnRequest, v3_and_below_transactional_id=TXN,
                              v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
                              v3_and_below_topics=(topic,)))  # fmt: skip
    (result,) = answer.results_by_topic_v3_and_below
    return {r.partition_index: r.partition_error_code for r in result.results_by_partition}


def fetch(sock: socket.socket, isolation: int) -> Any:
    partition = build(fetch_v11.FetchPartition, partition=0, fetch_offset=0,
                      partition_max_bytes=1 << 20)  # fmt: skip
    topic = build(fetch_v11.FetchTopic, topic=TOPIC, partitions=(partition,))
    answer = call(sock, build(fetch_v11.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0),
                              min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
                              topics=(topic,)))  # fmt: skip
    return answer.responses[0].partitions[0]


def latest(sock: socket.socket, isolation: int) -> int:
    partition = build(list_v5.ListOffsetsPartition, partition_index=0, timestamp=-1)
    topic = build(list_v5.ListOffsetsTopic, name=TOPIC, partitions=(partition,))
    answer = call(sock, build(list_v5.ListOffsetsRequest, replica_id=-1,
                              isolation_level=isolation, topics=(topic,)))  # fmt: skip
    return int(answer.topics[0].partitions[0].offset)


async def test_transactional_batches_need_their_partition_added(broker: Server) -> None:
    broker.services.logs.create_topic(TOPIC, 2)
    await asyncio.to_thread(scenario, broker.port)  # a blocking client, off the broker's loop


def scenario(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        init = call(sock, build(InitProducerIdRequest, transactional_id=TXN, producer_id=-1,
                                transaction_timeout=MINUTE, producer_epoch=-1))  # fmt: skip
        assert init.error_code == ErrorCode.none
        pid = int(init.producer_id)
        assert produce(sock, produce_v10, 0, pid, 0) == ErrorCode.invalid_txn_state
        assert produce(sock, produce_v11, 0, pid, 0) == ErrorCode.transaction_abortable
        assert produce(sock, produce_v10, 0, pid, 0, txn_id=None) == (
            ErrorCode.transactional_id_authorization_failed
        )
        assert add(sock, pid, (0, 7)) == {
            0: ErrorCode.operation_not_attempted,
            7: ErrorCode.unknown_topic_or_partition,
        }
        assert add(sock, pid, (0,)) == {0: ErrorCode.none}
        assert produce(sock, produce_v10, 0, pid, 0) == ErrorCode.none
        assert produce(sock, produce_v10, 1, pid, 0) == ErrorCode.invalid_txn_state

        both = build(add_v5.AddPartitionsToTxnTopic, name=TOPIC, partitions=(0, 1))
        verify = build(add_v5.AddPartitionsToTxnTransaction, transactional_id=TXN, producer_id=pid,
                       producer_epoch=0, verify_only=True, topics=(both,))  # fmt: skip
        answer = call(sock, build(add_v5.AddPartitionsToTxnRequest, transactions=(verify,)))
        (result,) = answer.results_by_transaction[0].topic_results
        assert {r.partition_index: r.partition_error_code for r in result.results_by_partition} == {
            0: ErrorCode.none, 1: ErrorCode.transaction_abortable
        }  # fmt: skip

        # Open: read_committed stops at its first offset (0); read_uncommitted sees the batch.
        assert (latest(sock, 1), latest(sock, 0)) == (0, 1)
        committed, uncommitted = fetch(sock, 1), fetch(sock, 0)
        assert (committed.last_stable_offset, committed.high_watermark) == (0, 1)
        assert committed.records == b"" and uncommitted.records
        assert committed.aborted_transactions == () and uncommitted.aborted_transactions is None

        end = call(sock, build(EndTxnRequest, transactional_id=TXN, producer_id=pid,
                               producer_epoch=0, committed=False))  # fmt: skip
        assert end.error_code == ErrorCode.none
        aborted = fetch(sock, 1)  # the batch and its ABORT marker, and the aborted range
        assert (aborted.last_stable_offset, aborted.high_watermark) == (2, 2)
        assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(pid, 0)]
        assert latest(sock, 1) == 2


async def test_transactions_and_producers_are_described(broker: Server) -> None:
    """DescribeTransactions, ListTransactions and DescribeProducers, as kafka-transactions.sh
    asks them (Kafka's `TransactionCoordinator.handleDescribeTransactions`,
    `TransactionStateManager.listTransactionStates`, `ReplicaManager.activeProducerState`)."""
    broker.services.logs.create_topic(TOPIC, 2)
    await asyncio.to_thread(described, broker.port)


def described(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        init = call(sock, build(InitProducerIdRequest, transactional_id=TXN, producer_id=-1,
                                transaction_timeout=MINUTE, producer_epoch=-1))  # fmt: skip
        pid = int(init.producer_id)
        assert add(sock, pid, (1,)) == {1: ErrorCode.none}
        assert produce(sock, produce_v10, 1, pid, 0) == ErrorCode.none

        answer = call(sock, build(describe_txn.DescribeTransactionsRequest,
                                  transactional_ids=(TXN, "nobody")))  # fmt: skip
        mine, unknown = answer.transaction_states
        assert unknown.error_code == ErrorCode.transactional_id_not_found
        assert (mine.error_code, mine.transaction_state, mine.producer_id) == (
            ErrorCode.none, "Ongoing", pid
        )  # fmt: skip
        assert [(t.topic, t.partitions) for t in mine.topics] == [(TOPIC, (1,))]
        assert mine.transaction_timeout == MINUTE

        def listed(**filters: Any) -> list[tuple[str, str]]:
            asked = {"state_filters": (), "producer_id_filters": (), "duration_filter": -1}
            answer = call(sock, build(list_txn.ListTransactionsRequest, **{**asked, **filters}))
            return [(t.transactional_id, t.transaction_state) for t in answer.transaction_states]

        assert listed() == [(TXN, "Ongoing")]
        assert listed(state_filters=("CompleteCommit",)) == []
        assert listed(state_filters=("Bogus",)) == []
        assert listed(producer_id_filters=(pid,)) == [(TXN, "Ongoing")]
        assert listed(duration_filter=3_600_000) == []  # not open for an hour

        topic = build(describe_producers.TopicRequest, name=TOPIC, partition_indexes=(0, 1, 5))
        answer = call(sock, build(describe_producers.DescribeProducersRequest, topics=(topic,)))
        idle, busy, missing = answer.topics[0].partitions
        assert idle.active_producers == ()
        assert missing.error_code == ErrorCode.unknown_topic_or_partition
        (state,) = busy.active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, 0, 0)
        assert state.current_txn_start_offset == 0


async def test_an_offset_an_open_transaction_commits_is_unstable(broker: Server) -> None:
    """OffsetFetch with RequireStable (v7+, KIP-447) answers UNSTABLE_OFFSET_COMMIT for a
    partition an open transaction commits an offset of (Kafka's GroupMetadataManager), and the
    offset itself once the transaction commits; without RequireStable, the last committed."""
    broker.services.logs.create_topic(TOPIC, 2)
    await asyncio.to_thread(unstable, broker.port)


def unstable(port: int) -> None:
    group = "copiers"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        init = call(sock, build(InitProducerIdRequest, transactional_id=TXN, producer_id=-1,
                                transaction_timeout=MINUTE, producer_epoch=-1))  # fmt: skip
        pid = int(init.producer_id)
        added = call(sock, build(add_offsets.AddOffsetsToTxnRequest, transactional_id=TXN,
                                 producer_id=pid, producer_epoch=0, group_id=group))  # fmt: skip
        assert added.error_code == ErrorCode.none
        offset = build(txn_commit.TxnOffsetCommitRequestPartition, partition_index=0,
                       committed_offset=17, committed_leader_epoch=-1)  # fmt: skip
        topic = build(txn_commit.TxnOffsetCommitRequestTopic, name=TOPIC, partitions=(offset,))
        commit = call(sock, build(
            txn_commit.TxnOffsetCommitRequest, transactional_id=TXN, group_id=group,
            producer_id=pid, producer_epoch=0, generation_id=-1, member_id="",
            group_instance_id=None, topics=(topic,),
        ))  # fmt: skip
        assert commit.topics[0].partitions[0].error_code == ErrorCode.none

        def fetched(stable: bool) -> tuple[ErrorCode, int]:
            topic = build(offset_fetch.OffsetFetchRequestTopic, name=TOPIC, partition_indexes=(0,))
            answer = call(sock, build(offset_fetch.OffsetFetchRequest, group_id=group,
                                      topics=(topic,), require_stable=stable))  # fmt: skip
            p = answer.topics[0].partitions[0]
            return ErrorCode(p.error_code), int(p.committed_offset)

        assert fetched(True) == (ErrorCode.unstable_offset_commit, -1)
        assert fetched(False) == (ErrorCode.none, -1)  # nothing committed yet
        end = call(sock, build(EndTxnRequest, transactional_id=TXN, producer_id=pid,
                               producer_epoch=0, committed=True))  # fmt: skip
        assert end.error_code == ErrorCode.none
        assert fetched(True) == fetched(False) == (ErrorCode.none, 17)


@pytest.mark.parametrize(  # the timer that finishes what is left stays out of the way
    "broker_overrides", [{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 3_600_000}]
)
async def test_a_commit_whose_client_is_gone_at_once_completes(broker: Server) -> None:
    """An EndTxn(commit) whose client closes its connection right after sending it, for a
    transaction of many partitions (its markers take several loop turns). The decision is
    written, and the markers and CompleteCommit follow without the client, as Kafka's
    coordinator sends a decided transaction's markers whatever became of the EndTxn
    (`TransactionCoordinator.endTransaction` hands them to `TransactionMarkerChannelManager`
    and does not wait for the caller). Before, the request's task, cancelled when its
    connection was lost, stopped between markers: the transaction stayed PrepareCommit, its
    partitions' LSO held, until the timer's next round (here, an hour away)."""
    partitions = 3000
    await asyncio.to_thread(broker.services.logs.create_topic, TOPIC, partitions)
    await asyncio.to_thread(commit_and_go, broker.port, partitions)
    txns = broker.services.transactions.txns
    deadline = asyncio.get_running_loop().time() + 30
    while txns[TXN].state != "CompleteCommit":
        assert asyncio.get_running_loop().time() < deadline, txns[TXN].state
        await asyncio.sleep(0.02)
    plog = broker.services.logs.log(TOPIC, 0)
    assert plog is not None
    assert plog.last_stable_offset == plog.log_end_offset == 2  # the record, its marker


def commit_and_go(port: int, partitions: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        init = call(sock, build(InitProducerIdRequest, transactional_id=TXN, producer_id=-1,
                                transaction_timeout=MINUTE, producer_epoch=-1))  # fmt: skip
        pid = int(init.producer_id)
        assert set(add(sock, pid, tuple(range(partitions))).values()) == {ErrorCode.none}
        assert produce(sock, produce_v10, 0, pid, 0) == ErrorCode.none
        end = build(EndTxnRequest, transactional_id=TXN, producer_id=pid, producer_epoch=0,
                    committed=True)  # fmt: skip
        sock.sendall(frame(encode_request(end, 1, "gone-at-once")))
