"""The transaction coordinator wired to this broker: markers go into the partitions' logs
(waking fetches waiting on the last stable offset), committed offsets into the offset store,
producer ids from the broker's allocator. Its duties (timeouts, expiry, markers a failed write
left to do) run from `Server`'s timers through `tick_timeouts` and `tick_expiry`.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping

import structlog

from broker.config import BrokerConfig
from broker.notifier import Notifier
from broker.producer_ids import ProducerIdAllocator
from coordinator.offset_store import OffsetStore
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
) -> TransactionCoordinator:
    def write_markers(
        partitions: Iterable[TopicPartition], producer_id: int, epoch: int, commit: bool
    ) -> set[TopicPartition]:
        failed: set[TopicPartition] = set()
        now = now_ms()
        for tp in partitions:
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
    coordinator.complete_prepared(now_ms())
    return coordinator
