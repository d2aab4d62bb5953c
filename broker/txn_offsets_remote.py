"""TxnOffsetCommit on a group coordinator whose transaction coordinator is another process
(`--processes N`, `send_offsets_to_transaction`).

As Kafka's group coordinator does: it verifies with the transaction's coordinator that the
transaction has added the group's `__consumer_offsets` partition (AddPartitionsToTxn
`verify_only`, KIP-890; skipped while the producer's transaction is open here at that epoch, as
for a data partition), then writes the offsets to its own offsets log as a transactional batch
of the producer, staged until the transaction's marker (`coordinator/staged_offsets.py`).

Errors reach the client as Kafka's `CoordinatorOperationExceptionHelper.handleOperationException`
turns them: no answer from the coordinator (NETWORK_EXCEPTION) is COORDINATOR_LOAD_IN_PROGRESS
(retried without a coordinator lookup), NOT_ENOUGH_REPLICAS and REQUEST_TIMED_OUT are
COORDINATOR_NOT_AVAILABLE, a failed write (KAFKA_STORAGE_ERROR) is NOT_COORDINATOR; a fenced
producer is INVALID_PRODUCER_EPOCH (`AddPartitionsToTxnManager`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.context import RequestContext
from broker.node_link import NodeLinks
from broker.slicing import Slicer
from broker.txn_verify import TxnRequest
from broker.txn_verify import verify
from coordinator.transaction_coordinator import OFFSETS_PER_CALL
from protocol.consumer_offsets import OffsetValue
from protocol.transaction_log import PendingOffset
from storage.errors import StorageError
from storage.topics import CONSUMER_OFFSETS

_FOR_OFFSETS = {
    ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
}


class _Request(TxnRequest, Protocol):
    @property
    def group_id(self) -> str: ...


async def staged_remotely(
    ctx: RequestContext, links: NodeLinks, request: _Request,
    rows: Sequence[tuple[tuple[str, int], PendingOffset]], slicer: Slicer,
) -> ErrorCode:  # fmt: skip
    """The request's offsets verified and staged here, OFFSETS_PER_CALL a batch; the code."""
    txn_id, pid, epoch = request.transactional_id, request.producer_id, request.producer_epoch
    offsets = ctx.services.offsets
    node = ctx.services.node_id
    if offsets.staged.epoch(pid) != epoch:  # not open here yet: ask its coordinator
        coordinator = ctx.services.config.ownership.coordinator(txn_id)
        codes = await verify(links, coordinator, txn_id, pid, epoch, {CONSUMER_OFFSETS: [node]})
        code = codes.get((CONSUMER_OFFSETS, node), ErrorCode.invalid_txn_state)
        if code is not ErrorCode.none:
            return _FOR_OFFSETS.get(code, code)
    for start in range(0, len(rows), OFFSETS_PER_CALL):
        now = ctx.services.now_ms()
        values = {
            tp: OffsetValue(o.offset, o.leader_epoch, o.metadata, now)
            for tp, o in rows[start : start + OFFSETS_PER_CALL]
        }
        try:
            offsets.stage_txn(pid, epoch, request.group_id, values)
        except StorageError as e:
            return _FOR_OFFSETS.get(e.error_code, e.error_code)
        await slicer.pause()
    return ErrorCode.none
