"""Produce of transactional batches: each must belong to an open transaction that added its
partition (KIP-890 part 1, Kafka's transaction verification on the partition leader).

Kafka 4 answers a batch whose partition the transaction did not add TRANSACTION_ABORTABLE from
Produce v11 and INVALID_TXN_STATE before (`AddPartitionsToTxnManager`
`produceRequestVersionToTransactionSupportedOperation`, and its mapping of the coordinator's
answer: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS the retriable
NOT_ENOUGH_REPLICAS). Transactional records need WRITE on the request's TransactionalId
(`KafkaApis.handleProduceRequest`); without one they are refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from broker.authorization import authorize
from broker.context import RequestContext
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import parse_header

# The low byte of a batch's attributes, which holds the transactional bit.
TXN_FLAG_BYTE = ATTRIBUTES_POS + 1
# With the coordinator in another process (`broker/txn_verify.py`), its answer or its silence
# maps as `ReplicaManager.postVerificationCallback`: what older clients might not retry becomes
# the retriable NOT_ENOUGH_REPLICAS (it triggers no metadata refresh).
_FOR_PRODUCE = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
    ErrorCode.network_exception: ErrorCode.not_enough_replicas,
    ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
    ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
}


def is_transactional(records: bytes) -> bool:
    """Whether the first batch says it is transactional (a header byte; nothing decoded).
    Storage refuses a transactional batch that is not alone in its records."""
    return len(records) > TXN_FLAG_BYTE and bool(records[TXN_FLAG_BYTE] & TRANSACTIONAL_MASK)


def refusal(
    ctx: RequestContext, txn_id: str | None, topic: str, partition: int, records: bytes,
    remote: Mapping[tuple[str, int], ErrorCode] | None = None,
) -> ErrorCode | None:  # fmt: skip
    """Why this transactional batch may not be written (None: it may). `remote`: the verdicts
    of a coordinator in another process (`broker/txn_verify.py`); a batch it has none for
    needed no asking."""
    if txn_id is None or not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
    ):
        return ErrorCode.transactional_id_authorization_failed
    if remote is not None:
        code = remote.get((topic, partition), ErrorCode.none)
    else:
        try:
            header = parse_header(records)
        except InvalidRecordBatch:
            return None  # the append refuses it, saying why
        code = ctx.services.transactions.verify(
            txn_id, header.producer_id, header.producer_epoch, (topic, partition)
        )
    if code is ErrorCode.none:
        return None
    if code is ErrorCode.transaction_abortable and ctx.version <= 10:
        return ErrorCode.invalid_txn_state
    return _FOR_PRODUCE.get(code, code)
