"""The transaction coordinator wired to this broker: markers go into the partitions' logs
(waking fetches waiting on the last stable offset), committed offsets into the offset store,
producer ids from the broker's allocator. Its duties (timeouts, expiry, markers a failed write
left to do) run from `Server`'s timers through `transaction_timeouts` and `expire_ids`, step by
step with the loop free between steps, as EndTxn and a fencing InitProducerId complete their
transaction (`finish`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from broker.config import BrokerConfig
from broker.notifier import Notifier
from broker.ownership import Ownership
from broker.ownership import group_hash
from broker.producer_ids import ProducerIdAllocator
from broker.share.txn_acks import EndShareAcks
from broker.share.txn_acks import NoShareAcks
from broker.slicing import Slicer
from broker.txn_markers import MarkerChannel
from coordinator.offset_store import OffsetStore
from coordinator.transaction_coordinator import SHARE_ACKS_PARTITION
from coordinator.transaction_coordinator import SHARE_STATE
from coordinator.transaction_coordinator import OffsetsPlacement
from coordinator.transaction_coordinator import TransactionCoordinator
from coordinator.transaction_coordinator import TxnLimits
from coordinator.transaction_coordinator import share_participant
from coordinator.transaction_log import TransactionLog
from protocol.consumer_offsets import OffsetValue
from protocol.transaction_log import PendingOffset
from protocol.transaction_log import TopicPartition
from storage.errors import StorageError
from storage.log_manager import LogManager
from storage.topics import CONSUMER_OFFSETS

log = structlog.get_logger("shoal.transactions")

# How long EndTxn waits for the markers other processes write: Kafka answers
# EndTxn once the decision is written, so a leader that is down only delays the markers.
REMOTE_PATIENCE_S = 5.0


class RemoteMarkers:
    """Which of a transaction's partitions other processes lead, and their markers' channel."""

    def __init__(self, logs: LogManager, ownership: Ownership, channel: MarkerChannel) -> None:
        self._logs = logs
        self._owner = ownership
        self.channel = channel

    @property
    def ownership(self) -> Ownership:
        return self._owner

    def split(
        self, partitions: Iterable[TopicPartition], pid: int, epoch: int, commit: bool
    ) -> tuple[list[TopicPartition], set[TopicPartition]]:
        """The partitions led here, and those of other leaders whose markers are not written
        yet (their delivery started)."""
        here: list[TopicPartition] = []
        elsewhere: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            if tp[0] == CONSUMER_OFFSETS:  # a group's offsets, staged by its coordinator
                elsewhere.setdefault(tp[1], []).append(tp)
                continue
            info = self._logs.topic(tp[0])
            leader = self._owner.leader(info.topic_id, tp[1]) if info is not None else None
            if leader is None or leader == self._owner.node_id:
                here.append(tp)
            else:
                elsewhere.setdefault(leader, []).append(tp)
        missing: set[TopicPartition] = set()
        for node, tps in elsewhere.items():
            missing |= self.channel.write(node, tps, pid, epoch, commit)
        return here, missing


@dataclass(frozen=True, slots=True)
class _LocalMarkers:
    """Markers appended to this process's partition logs."""

    logs: LogManager
    notifier: Notifier
    share_acks: EndShareAcks
    now: int

    def __call__(
        self, partitions: Iterable[TopicPartition], producer_id: int, epoch: int, commit: bool
    ) -> set[TopicPartition]:
        """The partitions whose marker was not written."""
        failed: set[TopicPartition] = set()
        for tp in partitions:
            # Staged share acknowledgements first (`broker/share/txn_acks.py`): if they fail,
            # the marker is not written and both are tried again.
            if not self.share_acks(tp, producer_id, commit, self.now):
                failed.add(tp)
                continue
            plog = self.logs.log(*tp)
            if plog is None:  # deleted since it joined the transaction: nothing to end there
                continue
            try:
                plog.append_marker(producer_id, epoch, commit, now_ms=self.now)
            except StorageError:
                failed.add(tp)
                continue
            self.notifier.notify(tp)
        if failed:
            log.warning("transaction markers not written; retried", producer_id=producer_id,
                        partitions=len(failed))  # fmt: skip
        return failed


def transaction_coordinator(
    logs: LogManager,
    txn_log: TransactionLog,
    offsets: OffsetStore,
    producer_ids: ProducerIdAllocator,
    notifier: Notifier,
    config: Callable[[], BrokerConfig],
    now_ms: Callable[[], int],
    share_acks: EndShareAcks = NoShareAcks,
    remote: RemoteMarkers | None = None,
) -> TransactionCoordinator:
    def write_markers(
        partitions: Iterable[TopicPartition], producer_id: int, epoch: int, commit: bool
    ) -> set[TopicPartition]:
        failed: set[TopicPartition] = set()
        if remote is not None:  # `--processes N`: the other leaders' partitions go to them
            partitions, failed = remote.split(partitions, producer_id, epoch, commit)
        written = _LocalMarkers(logs, notifier, share_acks, now_ms())
        return failed | written(partitions, producer_id, epoch, commit)

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

    placement = None
    if remote is not None:
        owner = remote.ownership
        placement = OffsetsPlacement(owner.node_id, owner.nodes, group_hash)
    coordinator = TransactionCoordinator(
        txn_log, producer_ids.allocate, write_markers, commit_offsets, limits, placement
    )
    # A crash may have left transactions prepared: their markers are written before any client
    # is served, so nothing waits on them longer than the start.
    for txn_id in coordinator.prepared():  # a crash inside EndTxn: see broker/share/txn_acks.py
        m = coordinator.txns[txn_id]
        if m.state == "PrepareCommit" and any(tp[0] == SHARE_STATE for tp in m.partitions):
            log.warning("transaction committed at start: its staged share acknowledgements "
                        "not written before the crash were lost (those records are delivered "
                        "again)", transactional_id=txn_id, producer_id=m.producer_id)  # fmt: skip
    coordinator.complete_prepared(now_ms())
    # What this process staged was lost with its memory; other processes' stagings were not
    # (`--processes N`: they are asked before a commit, `broker/txn_share_remote.py`).
    own = remote.ownership if remote is not None else None
    mine = share_participant(own.node_id, own.nodes) if own is not None else SHARE_ACKS_PARTITION
    coordinator.abort_open_with(mine, now_ms())
    return coordinator


async def finish(
    coordinator: TransactionCoordinator, txn_id: str, now_ms: int, slicer: Slicer | None = None,
    remote: RemoteMarkers | None = None,
) -> bool:  # fmt: skip
    """Complete a prepared transaction a step at a time (markers, offsets, completion),
    yielding between slices; False when a write failed (the timer tries again). With
    `remote`, markers on their way to other processes are waited for, up to
    `REMOTE_PATIENCE_S`; still not written then, False (they go on being sent)."""
    slicer = slicer or Slicer()
    while True:
        done = coordinator.complete_step(txn_id, now_ms)
        if done is True:
            return True
        if done is None:  # a write failed, or markers are on their way to other processes
            m = coordinator.txns.get(txn_id)
            if remote is None or m is None:
                return False
            markers = (m.producer_id, m.producer_epoch, m.state == "PrepareCommit")
            # Only a delivery under way is waited for: a local write that failed (a full disk)
            # is the timer's to retry, not this loop's (it would go round without yielding).
            sending = remote.channel.sending(*markers)
            if not sending or not await remote.channel.delivered(*markers, REMOTE_PATIENCE_S):
                return False
            continue
        await slicer.pause()


async def transaction_timeouts(coordinator: TransactionCoordinator, now_ms: int) -> None:
    """Abort transactions open past their timeout, and finish every prepared one (those a
    failed write left too), in slices: thousands of transactions may time out together, each
    abort a write of its state and of markers."""
    slicer = Slicer()
    for txn_id in list(coordinator.txns):
        coordinator.abort_if_timed_out(txn_id, now_ms)
        await slicer.pause()
    for txn_id in coordinator.prepared():  # markers on their way to other processes are not
        await finish(coordinator, txn_id, now_ms, slicer)  # waited for: `finishing` ends those


def finishing(coordinator: TransactionCoordinator, now_ms: Callable[[], int]) -> Callable[[], None]:
    """What a marker channel calls when a delivery is written: `finish_prepared`, in a task
    (one at a time; a call while one runs has it run again after)."""
    state: dict[str, asyncio.Task[None] | bool] = {}

    def run() -> None:
        task = state.get("task")
        if isinstance(task, asyncio.Task) and not task.done():
            state["again"] = True
            return
        state["task"] = asyncio.get_running_loop().create_task(rounds())

    async def rounds() -> None:
        state["again"] = True
        while state.pop("again", False):
            try:
                await finish_prepared(coordinator, now_ms())
            except Exception:
                log.exception("prepared transactions not finished; the timer tries again")

    return run


async def finish_prepared(coordinator: TransactionCoordinator, now_ms: int) -> None:
    """Finish what every prepared transaction lacks, waiting on nothing: run when a marker
    another process wrote may have been the last one a transaction lacked."""
    slicer = Slicer()
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
