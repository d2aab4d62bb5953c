"""TxnShareAcknowledge with the transaction's coordinator in another process
(`shoal serve --processes N`).

Routed as KIP-1289's draft routes it (to the share-partition's leader, like ShareAcknowledge)
and built the way Kafka's brokers join a partition to a transaction for another coordinator
(KIP-890, `AddPartitionsToTxnManager`): the leader stages the acknowledgements in its own
memory (`broker/share/txn_acks.py`), after it has added the share-partitions to the
transaction with AddPartitionsToTxn v5 (`verify_only` false, a broker's request), together
with its own participant `(__share_group_state, its node id)`. The transaction's markers then
reach the share-partitions like any other partition (WriteTxnMarkers), and the leader applies
(COMMIT) or releases (ABORT) what it staged before it writes each marker, as with N = 1.

Staged acknowledgements live in memory, so a leader restarted mid-transaction has lost them.
Two checks keep the transaction whole:
- Before it stages for a transaction it has not joined since it started, the leader asks the
  coordinator whether its participant is in the transaction already (`verify_only`): if so, it
  staged there before a restart, and it refuses (TRANSACTION_ABORTABLE).
- Before the coordinator decides a commit, it asks each other process whose participant is in
  the transaction whether it still holds what it staged (Shoal's TxnShareStaged). One that
  does not makes it abort the transaction and fence its producer, as a single process does at
  its start (`abort_open_with`); one that cannot be reached (or refuses to answer) makes
  EndTxn answer CONCURRENT_TRANSACTIONS (the client retries; the transaction's timeout
  bounds it).
A marker of the producer that reaches the leader while it waits for the coordinator voids the
join (Kafka's `VerificationGuard`): the transaction it was joining may have ended meanwhile.
What is not covered: a leader killed after the coordinator decided a commit and before its
marker is written there (a window of one round trip) loses what it staged, and those records
are delivered again, as a single process killed inside EndTxn's commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.schema.types import TransactionalId
from kio.static.primitive import i16

from broker.node_link import NodeLinks
from broker.ownership import Ownership
from broker.share.txn_acks import TxnShareAcks
from broker.txn_verify import TxnRequest
from broker.txn_verify import verify
from coordinator.transaction_coordinator import SHARE_STATE
from coordinator.transaction_coordinator import TransactionCoordinator
from coordinator.transaction_coordinator import share_participant
from coordinator.txn_metadata import TxnState
from coordinator.txn_metadata import state_of
from protocol.shoal_apis import TxnShareStagedRequest

log = structlog.get_logger("shoal.transactions")

TopicPartition = tuple[str, int]
PROBE_TIMEOUT_S = 5.0  # a leader that does not answer in it is down (or stopped)
# What the client of TxnShareAcknowledge is told of the coordinator's answers.
_FOR_CLIENT = {
    ErrorCode.network_exception: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
}


async def join(
    links: NodeLinks, coordinator: int, acks: TxnShareAcks, node_id: int, nodes: int,
    request: TxnRequest, wanted: Collection[TopicPartition],
) -> ErrorCode:  # fmt: skip
    """This leader's share-partitions `wanted` (and its participant) added to the transaction
    by its coordinator, and the join recorded in `acks`; the code for the whole request."""
    pid, epoch = request.producer_id, request.producer_epoch
    guard = acks.guard(pid)
    code = ErrorCode.unknown_server_error
    try:
        code = await _added(links, coordinator, acks, share_participant(node_id, nodes),
                            request, wanted)  # fmt: skip
    finally:  # recorded only if added, and no marker of the producer came meanwhile
        fresh = acks.join(pid, epoch, guard if code is ErrorCode.none else None)
    if code is ErrorCode.none and not fresh:
        return ErrorCode.transaction_abortable
    return code


async def _added(
    links: NodeLinks, coordinator: int, acks: TxnShareAcks, me: TopicPartition,
    request: TxnRequest, wanted: Collection[TopicPartition],
) -> ErrorCode:  # fmt: skip
    txn_id, pid, epoch = request.transactional_id, request.producer_id, request.producer_epoch
    if not acks.joined(pid, epoch):
        seen = await verify(links, coordinator, txn_id, pid, epoch, {me[0]: [me[1]]})
        code = seen.get(me, ErrorCode.invalid_txn_state)
        if code is ErrorCode.none:  # joined before a restart: what it staged is gone
            log.warning("share acknowledgements refused: staged in this transaction before a "
                        "restart", transactional_id=txn_id, producer_id=pid)  # fmt: skip
            return ErrorCode.transaction_abortable
        if code is not ErrorCode.transaction_abortable:  # (that one: not in it, as wanted)
            return _FOR_CLIENT.get(code, code)
    by_topic: dict[str, list[int]] = {me[0]: [me[1]]}
    for topic, p in wanted:
        by_topic.setdefault(topic, []).append(p)
    added = await verify(links, coordinator, txn_id, pid, epoch, by_topic, verify_only=False)
    refused = [c for c in added.values() if c is not ErrorCode.none]
    return _FOR_CLIENT.get(refused[0], refused[0]) if refused else ErrorCode.none


def remote_participants(
    coordinator: TransactionCoordinator, txn_id: str, node_id: int, nodes: int
) -> list[int]:
    """The other processes that staged share acknowledgements in the transaction (asked by
    participant: a transaction may have a million partitions)."""
    m = coordinator.txns.get(txn_id)
    if m is None or state_of(m) is not TxnState.ONGOING:  # EndTxn answers what it is
        return []
    return [n for n in range(nodes) if n != node_id and (SHARE_STATE, n) in m.partitions]


async def held_everywhere(
    links: NodeLinks, coordinator: TransactionCoordinator, txn_id: str, pid: int, epoch: int,
    ownership: Ownership, now_ms: int,
) -> ErrorCode:  # fmt: skip
    """Before a commit is decided: NONE when every other process that staged in the
    transaction still holds it; CONCURRENT_TRANSACTIONS when one cannot be asked (retried);
    else the transaction is aborted here (fencing its producer) and NONE is returned, so that
    EndTxn answers what the fenced producer gets (PRODUCER_FENCED)."""
    nodes = remote_participants(coordinator, txn_id, ownership.node_id, ownership.nodes)
    if not nodes:
        return ErrorCode.none
    body = TxnShareStagedRequest(
        transactional_id=TransactionalId(txn_id), producer_id=ProducerId(pid),
        producer_epoch=i16(epoch),
    )  # fmt: skip
    answers = await asyncio.gather(
        *(links.request(n, body, PROBE_TIMEOUT_S) for n in nodes), return_exceptions=True
    )
    unreachable = False
    for node, answer in zip(nodes, answers, strict=True):
        if isinstance(answer, (OSError, TimeoutError)):
            log.warning("share-partition leader not reachable before a commit; retried",
                        transactional_id=txn_id, node=node, error=str(answer))  # fmt: skip
            unreachable = True
        elif isinstance(answer, BaseException):
            raise answer
        elif answer.error_code == ErrorCode.invalid_txn_state:  # it holds none of it
            coordinator.abort_lost(txn_id, pid, epoch, now_ms)
            return ErrorCode.none
        elif answer.error_code != ErrorCode.none:  # (CLUSTER_AUTHORIZATION_FAILED)
            log.error("share-partition leader refused to say what it staged",
                      transactional_id=txn_id, node=node,
                      error=ErrorCode(answer.error_code).name)  # fmt: skip
            unreachable = True
    return ErrorCode.concurrent_transactions if unreachable else ErrorCode.none
