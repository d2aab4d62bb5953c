"""A transactional id's state and the moves between states, as Kafka's `TransactionMetadata`
and `TransactionState` (core/.../coordinator/transaction/TransactionMetadata.scala).

    Empty ---AddPartitions/AddOffsets--> Ongoing ---EndTxn--> PrepareCommit | PrepareAbort
    PrepareCommit --markers written--> CompleteCommit      (likewise for abort)
    CompleteCommit | CompleteAbort | Empty --AddPartitions--> Ongoing (a new transaction)

Every state is a `TransactionRecord` (frozen); a move makes a new one, which the coordinator
writes to the transaction log before it takes its place (memory is never ahead of the log).
What a request adds to an ongoing transaction is the exception: written as an addition, then
put into the transaction's own partitions and offsets in place (`grow`), so that its cost is
what the request adds, not what the transaction holds.
PrepareEpochFence and Dead are not kept: the fence is written as PrepareAbort with the bumped
epoch (as Kafka writes it), and an expired id is written as a tombstone.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Mapping
from dataclasses import replace
from enum import Enum

from protocol.transaction_log import WHOLE
from protocol.transaction_log import PendingOffset
from protocol.transaction_log import TopicPartition
from protocol.transaction_log import TransactionRecord

# Kafka's RecordBatch.NO_PRODUCER_EPOCH and `TransactionMetadata.isEpochExhausted`: the last
# epoch is kept for fencing, so an id whose epoch reaches 32766 gets a new producer id.
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
ENDED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


def state_of(record: TransactionRecord) -> TxnState:
    return TxnState(record.state)


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


def new_id(
    transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
) -> TransactionRecord:
    """A transactional id seen for the first time: its first InitProducerId makes epoch 0."""
    return TransactionRecord(
        transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY.value,
        update_ms=now_ms,
    )  # fmt: skip


def next_epoch(m: TransactionRecord, timeout_ms: int, now_ms: int) -> TransactionRecord:
    """InitProducerId on an ended transaction: the epoch goes up by one, fencing older ones."""
    return replace(
        m,
        producer_epoch=m.producer_epoch + 1,
        last_producer_epoch=m.producer_epoch,
        timeout_ms=timeout_ms,
        state=TxnState.EMPTY.value,
        partitions=set(),
        offsets={},
        start_ms=-1,
        update_ms=now_ms,
        additions=0,
    )


def rotate_producer_id(
    m: TransactionRecord, producer_id: int, timeout_ms: int, now_ms: int
) -> TransactionRecord:
    """The epoch is exhausted: a new producer id at epoch 0 (Kafka's prepareProducerIdRotation)."""
    return replace(
        next_epoch(m, timeout_ms, now_ms),
        producer_id=producer_id,
        producer_epoch=0,
        last_producer_id=m.producer_id,
        last_producer_epoch=m.producer_epoch,
    )


def fence(m: TransactionRecord, now_ms: int) -> TransactionRecord:
    """Abort an ongoing transaction under a bumped epoch (Kafka's prepareFenceProducerEpoch,
    then PrepareAbort): its producer's later requests and batches are fenced."""
    epoch = m.producer_epoch if is_epoch_exhausted(m.producer_epoch) else m.producer_epoch + 1
    return replace(
        m, producer_epoch=epoch, last_producer_epoch=-1, state=TxnState.PREPARE_ABORT.value,
        update_ms=now_ms,
    )  # fmt: skip


def begin(m: TransactionRecord, now_ms: int) -> TransactionRecord:
    """A new transaction (the next number), empty until its first addition is written."""
    return replace(
        m, state=TxnState.ONGOING.value, partitions=set(), offsets={}, start_ms=now_ms,
        update_ms=now_ms, txn=m.txn + 1, additions=0,
    )  # fmt: skip


def whole(
    m: TransactionRecord, partitions: Collection[TopicPartition], group: str,
    offsets: Mapping[TopicPartition, PendingOffset], now_ms: int,
) -> TransactionRecord:  # fmt: skip
    """A transaction of number 0 (begun before additions existed) with more in it: a copy,
    written whole, as it was."""
    merged = {g: dict(tps) for g, tps in m.offsets.items()}
    if offsets:
        merged.setdefault(group, {}).update(offsets)
    return replace(m, partitions=m.partitions | set(partitions), offsets=merged, update_ms=now_ms)


def grow(
    m: TransactionRecord, partitions: Collection[TopicPartition], group: str,
    offsets: Mapping[TopicPartition, PendingOffset], now_ms: int,
) -> TransactionRecord:  # fmt: skip
    """An addition written: it goes into `m`'s own containers (in place), one slot more."""
    m.partitions.update(partitions)
    if offsets:
        m.offsets.setdefault(group, {}).update(offsets)
    return replace(m, update_ms=now_ms, additions=m.additions + 1)


def is_whole(m: TransactionRecord) -> bool:
    return m.txn == WHOLE


def prepare_end(m: TransactionRecord, commit: bool, now_ms: int) -> TransactionRecord:
    state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    return replace(m, state=state.value, update_ms=now_ms)


def complete(m: TransactionRecord, now_ms: int) -> TransactionRecord:
    """Every marker written (and, on commit, every offset): the transaction is over."""
    state = (
        TxnState.COMPLETE_COMMIT
        if state_of(m) is TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    return replace(
        m, state=state.value, partitions=set(), offsets={}, update_ms=now_ms, additions=0
    )
