"""A transactional batch verified with a coordinator in another process (`--processes 2`,
two in-process nodes over real sockets, raw requests): what the leader answers the producer,
as Kafka's leader does (`AddPartitionsToTxnManager.AddPartitionsToTxnHandler` turns no answer
into NETWORK_EXCEPTION and PRODUCER_FENCED into INVALID_PRODUCER_EPOCH; `ReplicaManager`'s
`postVerificationCallback` turns NETWORK_EXCEPTION, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
and COORDINATOR_LOAD_IN_PROGRESS into the retriable NOT_ENOUGH_REPLICAS), and that the
verifications share one kept connection to the coordinator.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v3 import request as add_offsets_v3
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
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
from tests.brokers import free_ports
from tests.brokers import make_server
from tests.probe import read_frame

pytestmark = pytest.mark.integration

TOPIC = "ledger"
MINUTE = datetime.timedelta(minutes=1)
# A transactional id coordinated by node 0.
TXN = next(f"t{i}" for i in range(100) if zlib.crc32(f"t{i}".encode()) % 2 == 0)


def _node(data: Path, port: int, node: int) -> Server:
    return make_server(
        data, listeners=f"PLAINTEXT://127.0.0.1:{port + node}", processes=2, **{"node.id": node}
    )


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[tuple[Server, Server, int]]:
    """Node 0 (started: it made the topic) and node 1 (not started), on port and port + 1."""
    port = free_ports(2)
    zero, one = _node(tmp_path, port, 0), _node(tmp_path, port, 1)
    await zero.start()
    zero.services.logs.create_topic(TOPIC, 4)
    one.services.logs.refresh_topics()
    try:
        yield zero, one, port
    finally:
        for server in (one, zero):
            if server.port:
                await server.stop()


def call(sock: socket.socket, body: RequestPayload) -> Any:
    sock.sendall(frame(encode_request(body, 1, "wire")))
    return decode_response(body.__api_key__, body.__version__, read_frame(sock))[1]


def produce(port: int, module: Any, partition: int, pid: int, epoch: int, seq: int) -> ErrorCode:
    records = build_batch(
        [(None, b"v%d" % seq)], timestamp_ms=1, producer_id=pid, producer_epoch=epoch,
        base_sequence=seq, attributes=TRANSACTIONAL_MASK,
    )  # fmt: skip
    data = build(module.PartitionProduceData, index=partition, records=records)
    topic = build(module.TopicProduceData, name=TOPIC, partition_data=(data,))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = call(sock, build(module.ProduceRequest, transactional_id=TXN, acks=-1,
                                  timeout=MINUTE, topic_data=(topic,)))  # fmt: skip
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


def begin(port: int, partitions: tuple[int, ...]) -> tuple[int, int]:
    """InitProducerId on the coordinator (node 0) and the partitions added; (id, epoch)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        deadline = time.monotonic() + 30
        while True:  # a transaction still open is aborted first: retried, as clients do
            init = call(sock, build(InitProducerIdRequest, transactional_id=TXN, producer_id=-1,
                                    transaction_timeout=MINUTE, producer_epoch=-1))  # fmt: skip
            if init.error_code != ErrorCode.concurrent_transactions:
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert init.error_code == ErrorCode.none
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        topic = build(add_v3.AddPartitionsToTxnTopic, name=TOPIC, partitions=partitions)
        added = call(sock, build(add_v3.AddPartitionsToTxnRequest,
                                 v3_and_below_transactional_id=TXN, v3_and_below_producer_id=pid,
                                 v3_and_below_producer_epoch=epoch,
                                 v3_and_below_topics=(topic,)))  # fmt: skip
    codes = {
        r.partition_error_code
        for t in added.results_by_topic_v3_and_below for r in t.results_by_partition
    }  # fmt: skip
    assert codes <= {ErrorCode.none}
    return pid, epoch


def _led_by_one(one: Server) -> list[int]:
    owner, info = one.config.ownership, one.services.logs.topic(TOPIC)
    assert info is not None
    return [p for p in range(4) if owner.leader(info.topic_id, p) == 1]


async def test_node_1_verifies_with_node_0_over_one_kept_connection(
    nodes: tuple[Server, Server, int],
) -> None:
    """Batches node 1 leads of a transaction node 0 coordinates: added ones are written (each
    partition verified once, over one connection, kept), one not added is refused as Kafka's
    leader refuses it (TRANSACTION_ABORTABLE from Produce v11, INVALID_TXN_STATE before), and
    a fenced epoch gets INVALID_PRODUCER_EPOCH (the coordinator's PRODUCER_FENCED)."""
    _, one, port = nodes
    await one.start()
    mine = _led_by_one(one)
    assert len(mine) == 2
    pid, epoch = await asyncio.to_thread(begin, port, (mine[0],))
    p1 = port + 1
    assert (
        await asyncio.to_thread(produce, p1, produce_v11, mine[0], pid, epoch, 0) == ErrorCode.none
    )
    assert (
        await asyncio.to_thread(produce, p1, produce_v11, mine[0], pid, epoch, 1) == ErrorCode.none
    )
    assert await asyncio.to_thread(produce, p1, produce_v11, mine[1], pid, epoch, 0) == (
        ErrorCode.transaction_abortable
    )
    assert await asyncio.to_thread(produce, p1, produce_v10, mine[1], pid, epoch, 0) == (
        ErrorCode.invalid_txn_state
    )
    links = one.services.node_links
    assert links is not None and links.opened == 1  # every verification on the one connection
    fenced_pid, fenced_epoch = await asyncio.to_thread(begin, port, (mine[1],))  # epoch bumped
    assert fenced_pid == pid and fenced_epoch > epoch
    assert await asyncio.to_thread(produce, p1, produce_v11, mine[1], pid, epoch, 0) == (
        ErrorCode.invalid_producer_epoch
    )
    assert links.opened == 1


async def test_a_coordinator_that_does_not_answer_gets_not_enough_replicas(
    nodes: tuple[Server, Server, int],
) -> None:
    """Node 0, the coordinator, is gone: node 1 cannot verify, and answers the retriable
    NOT_ENOUGH_REPLICAS (Kafka: NETWORK_EXCEPTION from the manager, mapped by ReplicaManager)
    rather than writing the batch; other clients are served meanwhile."""
    zero, one, port = nodes
    await one.start()
    mine = _led_by_one(one)
    pid, epoch = await asyncio.to_thread(begin, port, (mine[0],))
    await zero.stop()
    zero.port = 0
    code = await asyncio.to_thread(produce, port + 1, produce_v11, mine[0], pid, epoch, 0)
    assert code == ErrorCode.not_enough_replicas
    log = one.services.logs.log(TOPIC, mine[0])
    assert log is not None and log.log_end_offset == 0


GROUP = next(f"g{i}" for i in range(100) if zlib.crc32(f"g{i}".encode()) % 2 == 1)  # node 1's


def add_offsets(port: int, pid: int, epoch: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        added = call(sock, build(add_offsets_v3.AddOffsetsToTxnRequest, transactional_id=TXN,
                                 producer_id=pid, producer_epoch=epoch,
                                 group_id=GROUP))  # fmt: skip
    assert added.error_code == ErrorCode.none


def txn_offset_commit(port: int, pid: int, epoch: int, offset: int) -> ErrorCode:
    p = build(txn_commit.TxnOffsetCommitRequestPartition, partition_index=0,
              committed_offset=offset, committed_leader_epoch=-1)  # fmt: skip
    topic = build(txn_commit.TxnOffsetCommitRequestTopic, name=TOPIC, partitions=(p,))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = call(sock, build(
            txn_commit.TxnOffsetCommitRequest, transactional_id=TXN, group_id=GROUP,
            producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
            group_instance_id=None, topics=(topic,),
        ))  # fmt: skip
    return ErrorCode(answer.topics[0].partitions[0].error_code)


def fetched(port: int, stable: bool) -> tuple[ErrorCode, int]:
    topic = build(offset_fetch.OffsetFetchRequestTopic, name=TOPIC, partition_indexes=(0,))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = call(sock, build(offset_fetch.OffsetFetchRequest, group_id=GROUP,
                                  topics=(topic,), require_stable=stable))  # fmt: skip
    p = answer.topics[0].partitions[0]
    return ErrorCode(p.error_code), int(p.committed_offset)


async def test_txn_offset_commit_on_the_groups_node_is_staged_until_the_marker(
    nodes: tuple[Server, Server, int],
) -> None:
    """TxnOffsetCommit to node 1 (the group's coordinator) of a transaction node 0
    coordinates: staged (OffsetFetch RequireStable answers UNSTABLE_OFFSET_COMMIT, KIP-447),
    committed by the marker node 0 sends at EndTxn; a TxnOffsetCommit whose AddOffsetsToTxn
    never came is refused TRANSACTION_ABORTABLE (v4+; INVALID_TXN_STATE before)."""
    _, one, port = nodes
    await one.start()
    pid, epoch = await asyncio.to_thread(begin, port, ())
    assert await asyncio.to_thread(txn_offset_commit, port + 1, pid, epoch, 7) == (
        ErrorCode.invalid_txn_state  # v3: TRANSACTION_ABORTABLE as older clients know it
    )
    await asyncio.to_thread(add_offsets, port, pid, epoch)
    assert await asyncio.to_thread(txn_offset_commit, port + 1, pid, epoch, 17) == ErrorCode.none
    assert await asyncio.to_thread(fetched, port + 1, True) == (
        ErrorCode.unstable_offset_commit,
        -1,
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        end = await asyncio.to_thread(call, sock, build(EndTxnRequest, transactional_id=TXN,
                                                        producer_id=pid, producer_epoch=epoch,
                                                        committed=True))  # fmt: skip
    assert end.error_code == ErrorCode.none
    assert await asyncio.to_thread(fetched, port + 1, True) == (ErrorCode.none, 17)


async def test_txn_offset_commit_whose_coordinator_does_not_answer_is_retried(
    nodes: tuple[Server, Server, int],
) -> None:
    """The transaction's coordinator is gone when the group's coordinator verifies: Kafka's
    `CoordinatorOperationExceptionHelper.handleOperationException` answers NETWORK_EXCEPTION
    as COORDINATOR_LOAD_IN_PROGRESS (clients retry it without a coordinator lookup); nothing is
    staged."""
    zero, one, port = nodes
    await one.start()
    pid, epoch = await asyncio.to_thread(begin, port, ())
    await asyncio.to_thread(add_offsets, port, pid, epoch)
    await zero.stop()
    zero.port = 0
    assert await asyncio.to_thread(txn_offset_commit, port + 1, pid, epoch, 17) == (
        ErrorCode.coordinator_load_in_progress
    )
    assert len(one.services.offsets.staged) == 0
