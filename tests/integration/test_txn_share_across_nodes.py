"""TxnShareAcknowledge on a share-partition leader that is not the transaction's coordinator
(`--processes 2`, two in-process nodes over real sockets, raw requests): a leader restarted
after it staged in a transaction has lost what it staged (memory only), so it refuses to stage
more in that transaction, and the coordinator refuses its commit, aborting it and fencing the
producer (`broker/txn_share_remote.py`). Kafka has no such request; the checks follow how its
brokers guard a verified append (`VerificationGuard`) and how a coordinator fences a producer
whose transaction cannot complete (`abortTimedOutTransactions`)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.errors import ErrorCode

from broker.server import Server
from protocol.messages import build
from protocol.shoal_apis import TxnShareAcknowledgementBatch
from protocol.shoal_apis import TxnShareAcknowledgePartition
from protocol.shoal_apis import TxnShareAcknowledgeRequest
from protocol.shoal_apis import TxnShareAcknowledgeTopic
from protocol.shoal_apis import TxnShareStagedRequest
from tests.brokers import free_ports
from tests.integration.test_txn_across_nodes import TOPIC
from tests.integration.test_txn_across_nodes import TXN
from tests.integration.test_txn_across_nodes import _led_by_one
from tests.integration.test_txn_across_nodes import _node
from tests.integration.test_txn_across_nodes import begin
from tests.integration.test_txn_across_nodes import call

pytestmark = pytest.mark.integration


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[tuple[Server, Server, int, Path]]:
    """Node 0 (the coordinator of TXN) and node 1, both started, on port and port + 1."""
    port = free_ports(2)
    zero, one = _node(tmp_path, port, 0), _node(tmp_path, port, 1)
    await zero.start()
    zero.services.logs.create_topic(TOPIC, 4)
    one.services.logs.refresh_topics()
    await one.start()
    servers = [zero, one]
    try:
        yield zero, one, port, tmp_path
    finally:
        for server in reversed(servers):
            if server.port:
                await server.stop()


def stage(port: int, pid: int, epoch: int, partition: int) -> tuple[ErrorCode, ErrorCode]:
    """TxnShareAcknowledge of offsets 0..9 of `partition` by a member that holds none: the
    request's code and the partition's (INVALID_RECORD_STATE once the join went through)."""
    batch = TxnShareAcknowledgementBatch(first_offset=0, last_offset=9, acknowledge_types=(1,))
    p = TxnShareAcknowledgePartition(partition_index=partition, acknowledgement_batches=(batch,))
    topic = TxnShareAcknowledgeTopic(name=TOPIC, partitions=(p,))
    request = TxnShareAcknowledgeRequest(
        transactional_id=TXN, producer_id=pid, producer_epoch=epoch, group_id="g",
        member_id=str(uuid.uuid4()), topics=(topic,),
    )  # fmt: skip
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = call(sock, request)
    code = ErrorCode(answer.error_code)
    return code, ErrorCode(answer.topics[0].partitions[0].error_code)


def held(port: int, pid: int, epoch: int) -> ErrorCode:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        body = TxnShareStagedRequest(transactional_id=TXN, producer_id=pid, producer_epoch=epoch)
        return ErrorCode(call(sock, body).error_code)


def end(port: int, pid: int, epoch: int, commit: bool) -> ErrorCode:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = call(sock, build(EndTxnRequest, transactional_id=TXN, producer_id=pid,
                                  producer_epoch=epoch, committed=commit))  # fmt: skip
    return ErrorCode(answer.error_code)


async def test_a_leader_restarted_after_staging_refuses_and_the_commit_is_refused(
    nodes: tuple[Server, Server, int, Path],
) -> None:
    zero, one, port, data = nodes
    mine = _led_by_one(one)[0]
    pid, epoch = await asyncio.to_thread(begin, port, ())
    p1 = port + 1
    assert await asyncio.to_thread(held, p1, pid, epoch) == ErrorCode.invalid_txn_state
    # Joined through node 0 (the partition was added), nothing staged (the member holds none).
    staged = await asyncio.to_thread(stage, p1, pid, epoch, mine)
    assert staged == (ErrorCode.none, ErrorCode.invalid_record_state)
    m = zero.services.transactions.txns[TXN]
    assert (TOPIC, mine) in m.partitions and ("__share_group_state", 1) in m.partitions
    assert await asyncio.to_thread(held, p1, pid, epoch) == ErrorCode.none
    assert await asyncio.to_thread(held, p1, pid, epoch + 1) == ErrorCode.invalid_txn_state
    # A partition node 1 does not lead is not staged there.
    theirs = next(p for p in range(4) if p != mine and p not in _led_by_one(one))
    assert (await asyncio.to_thread(stage, p1, pid, epoch, theirs))[1] == (
        ErrorCode.not_leader_or_follower
    )

    await one.stop()  # a restart: what node 1 staged is gone
    again = _node(data, port, 1)
    await again.start()
    try:
        assert await asyncio.to_thread(held, p1, pid, epoch) == ErrorCode.invalid_txn_state
        assert (await asyncio.to_thread(stage, p1, pid, epoch, mine))[0] == (
            ErrorCode.transaction_abortable
        )
        assert await asyncio.to_thread(end, port, pid, epoch, True) == ErrorCode.producer_fenced
        assert zero.services.transactions.txns[TXN].state in ("PrepareAbort", "CompleteAbort")
    finally:
        await again.stop()


async def test_the_same_leader_not_restarted_stages_again_and_commits(
    nodes: tuple[Server, Server, int, Path],
) -> None:
    """The control: without the restart, a second request joins at once and the commit goes
    through (the coordinator asked node 1, which holds its part)."""
    zero, one, port, _ = nodes
    mine = _led_by_one(one)[0]
    pid, epoch = await asyncio.to_thread(begin, port, ())
    p1 = port + 1
    for _ in range(2):
        staged = await asyncio.to_thread(stage, p1, pid, epoch, mine)
        assert staged == (ErrorCode.none, ErrorCode.invalid_record_state)
    assert await asyncio.to_thread(end, port, pid, epoch, True) == ErrorCode.none
    # The commit's marker reached node 1 (its WriteTxnMarkers ended the join there).
    deadline = asyncio.get_running_loop().time() + 30
    while one.services.txn_share_acks is not None and one.services.txn_share_acks.joined(
        pid, epoch
    ):
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    assert zero.services.transactions.txns[TXN].state == "CompleteCommit"
