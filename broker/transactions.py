"""The transaction coordinator wired to this broker: markers go into the partitions' logs
(waking fetches waiting on the last stable offset), committed offsets into the offset store,
producer ids from the broker's allocator. Its duties (timeouts, expiry, markers a failed write
left to do) run from `Server`'s timers through `transaction_timeouts` and `expire_ids`, step by
step with the loop free between steps, as EndTxn and a fencing InitProducerId complete their
transaction (`finish`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping

import structlog

from broker.config import BrokerConfig
from broker.notifier import Notifier
from broker.producer_ids import ProducerIdAllocator
from broker.share.txn_acks import EndShareAcks
from broker.share.txn_acks import NoShareAcks
from broker.slicing import Slicer
from coordinator.offset_store import OffsetStore
from coordinator.transaction_coordinator import SHARE_ACKS_PARTITION
from coordinator.transaction_coordinator import TransactionCoordinator
from coordinator.transaction_coordinator import TxnLimits
from coordinator.transaction_log import TransactionLog
from protocol.consumer_offsets import OffsetValue
from protocol.transaction_log import PendingOffset
from protocol.transaction_log import TopicPartition
from storage.errors import StorageError
from storage.log_manager import LogManager

log = structlog.get_logger("shoal.transactions")


def transaction_coordinator(
    logs: LogManager,
    txn_log: TransactionLog,
    offsets: OffsetStore,
    producer_ids: ProducerIdAllocator,
    notifier: Notifier,
    config: Callable[[], BrokerConfig],
    now_ms: Callable[[], int],
    share_acks: EndShareAcks = NoShareAcks,
) -> TransactionCoordinator:
    def write_markers(
        partitions: Iterable[TopicPartition], producer_id: int, epoch: int, commit: bool
    ) -> set[TopicPartition]:
        failed: set[TopicPartition] = set()
        now = now_ms()
        for tp in partitions:
            # Staged share acknowledgements first (`broker/share/txn_acks.py`): if they fail,
            # the marker is not written and both are tried again.
            if not share_acks(tp, producer_id, commit, now):
                failed.add(tp)
                continue
            plog = logs.log(*tp)
            if plog is None:  # deleted since it joined the transaction: nothing to end there
                continue
            try:
                plog.append_marker(producer_id, epoch, commit, now_ms=now)
            except StorageError:
                failed.add(tp)
                continue
            notifier.notify(tp)
        return failed

    def commit_offsets(group: str, pending: Mapping[TopicPartition, PendingOffset]) -> None:
        now = now_ms()
        offsets.commit(
            group,
            {
                tp: OffsetValue(o.offset, o.leader_epoch, o.metadata, now)
                for tp, o in pending.items()
            },
        )

    def limits() -> TxnLimits:
        c = config()
        return TxnLimits(c.transaction_max_timeout_ms, c.transactional_id_expiration_ms)

    coordinator = TransactionCoordinator(
        txn_log, producer_ids.allocate, write_markers, commit_offsets, limits
    )
    # A crash may have left transactions prepared: their markers are written before any client
    # is served, so nothing waits on them longer than the start.
    for txn_id in coordinator.prepared():  # a crash inside EndTxn: see broker/share/txn_acks.py
        m = coordinator.txns[txn_id]
        if m.state == "PrepareCommit" and SHARE_ACKS_PARTITION in m.partitions:
            log.warning("transaction committed at start: its staged share acknowledgements "
                        "not written before the crash were lost (those records are delivered "
                        "again)", transactional_id=txn_id, producer_id=m.producer_id)  # fmt: skip
    coordinator.complete_prepared(now_ms())
    coordinator.abort_open_with(SHARE_ACKS_PARTITION, now_ms())
    return coordinator


async def finish(
    coordinator: TransactionCoordinator, txn_id: str, now_ms: int, slicer: Slicer | None = None
) -> bool:
    """Complete a prepared transaction a step at a time (markers, offsets, completion),
    yielding between slices; False when a write failed (the timer tries again)."""
    slicer = slicer or Slicer()
    while (done := coordinator.complete_step(txn_id, now_ms)) is False:
        await slicer.pause()
    return done is True


async def transaction_timeouts(coordinator: TransactionCoordinator, now_ms: int) -> None:
    """Abort transactions open past their timeout, and finish every prepared one (those a
    failed write left too), in slices: thousands of transactions may time out together, each
    abort a write of its state and of markers."""
    slicer = Slicer()
    for txn_id in list(coordinator.txns):
        coordinator.abort_if_timed_out(txn_id, now_ms)
        await slicer.pause()
    for txn_id in coordinator.prepared():
        await finish(coordinator, txn_id, now_ms, slicer)


def transaction_timeouts_now(coordinator: TransactionCoordinator, now_ms: int) -> None:
    """`transaction_timeouts` at once (a test's clock moved forward)."""
    coordinator.abort_timed_out(now_ms)
    coordinator.complete_prepared(now_ms)


async def expire_ids(coordinator: TransactionCoordinator, now_ms: int) -> None:
    """Forget expired transactional ids, a batch of tombstones at a time."""
    slicer = Slicer()
    forgotten = 0
    for txn_id in coordinator.expired_ids(now_ms):
        while (done := coordinator.forget_step(txn_id, now_ms)) is False:
            await slicer.pause()
        forgotten += 1 if done else 0
        await slicer.pause()
    if forgotten:
        log.info("transactional ids expired", count=forgotten)
