"""What each node's own files hold after a change of `--processes N` (`broker.node_migration`).

Read offline, before any node starts: every old node's `__consumer_offsets-0`,
`__transaction_state-0` and `producer-ids` (the data dir itself for N = 1, `__nodes/<i>` else,
and any leftover of an older N). Each group's committed offsets and each transactional id's
state go to the node that owns the key under the new N (`Ownership.coordinator`), written by
the coordinators' own classes (`OffsetStore`, `TransactionLog`) into new logs.

Several sources can hold one key only in a data dir an older version switched without this
step: the latest wins (an offset's commit timestamp, an id's last update).

Share groups (`coordinator.share_group_records`): with N > 1 a coordinator knows the share
groups recorded in its own offsets log, so each new coordinator gets a record of every share
group the data dir knows: those the old nodes recorded, and those with share state (all that
N = 1 records nothing for).

A transaction not ended at the stop is settled as Kafka's new coordinator settles what it
loads (`TransactionStateManager.loadTransactionsForTxnTopicPartition`, then
`TransactionCoordinator.onElection` completing PrepareCommit and PrepareAbort): a prepared
commit's offsets become the groups' committed offsets here (the decision is in the log; only the
markers are left, which the new coordinator writes at start), and an ongoing one is written
fenced, as PrepareAbort under a bumped epoch, as Kafka aborts one that timed out
(`abortTimedOutTransactions`): its staged offsets lived in the old node's offsets log, whose
`__consumer_offsets` partition means another node under the new N, so it cannot be committed
later; its producer gets PRODUCER_FENCED, and a new one with the id fences the old epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path

import structlog

from broker.ownership import Ownership
from broker.producer_ids import read_block_end
from coordinator import txn_metadata as moves
from coordinator.offset_store import OFFSETS_LOG_CONFIGS
from coordinator.offset_store import OffsetStore
from coordinator.share_group_records import ShareGroupRecords
from coordinator.transaction_coordinator import SHARE_STATE
from coordinator.transaction_log import TRANSACTION_LOG_CONFIGS
from coordinator.transaction_log import TransactionLog
from coordinator.txn_metadata import TxnState
from coordinator.txn_metadata import state_of
from protocol.consumer_offsets import OffsetValue
from protocol.transaction_log import WHOLE
from protocol.transaction_log import TransactionRecord
from storage.config import LogConfig
from storage.fsutil import fsync_dir
from storage.fsutil import write_synced
from storage.segment_log import SegmentLog
from storage.topics import CONSUMER_OFFSETS
from storage.topics import TRANSACTION_STATE

log = structlog.get_logger("shoal.node_migration")

PRODUCER_IDS = "producer-ids"
NODE_FILES = (f"{CONSUMER_OFFSETS}-0", f"{TRANSACTION_STATE}-0", PRODUCER_IDS)
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Source:
    """One old node's directory, and how its producer ids were spread: `offset + stride * k`."""

    path: Path
    stride: int
    offset: int


@dataclass
class Merged:
    offsets: dict[str, dict[TopicPartition, OffsetValue]] = field(default_factory=dict)
    txns: dict[str, TransactionRecord] = field(default_factory=dict)
    highest_id: int = -1  # above every producer id any old node may have handed out
    share_groups: set[str] = field(default_factory=set)  # recorded, or with share state


def read_sources(sources: list[Source], config: LogConfig, now_ms: Callable[[], int]) -> Merged:
    merged = Merged()
    staged: dict[tuple[int, int], dict[str, dict[TopicPartition, OffsetValue]]] = {}
    for source in sources:
        offsets_dir = source.path / f"{CONSUMER_OFFSETS}-0"
        if offsets_dir.is_dir():
            offsets_log = SegmentLog.open(offsets_dir, config.with_overrides(OFFSETS_LOG_CONFIGS))
            try:
                records = ShareGroupRecords(offsets_log, now_ms, lambda _: True)
                store = OffsetStore(offsets_log, now_ms, other_records=records.replay)
                merged.share_groups |= records.groups()
                for group, tp, value in store.all_offsets():
                    mine = merged.offsets.setdefault(group, {})
                    old = mine.get(tp)
                    if old is None or old.commit_timestamp_ms <= value.commit_timestamp_ms:
                        mine[tp] = value
                for pid, epoch, groups in store.staged.open_transactions():
                    for group, tps in groups.items():
                        staged.setdefault((pid, epoch), {}).setdefault(group, {}).update(tps)
            finally:
                offsets_log.close()
        txn_dir = source.path / f"{TRANSACTION_STATE}-0"
        if txn_dir.is_dir():
            txn_log = SegmentLog.open(txn_dir, config.with_overrides(TRANSACTION_LOG_CONFIGS))
            try:
                recovered = TransactionLog(txn_log, now_ms)
                for txn_id, m in recovered.recover().items():
                    old_m = merged.txns.get(txn_id)
                    if old_m is None or old_m.update_ms <= m.update_ms:
                        merged.txns[txn_id] = m
                merged.highest_id = max(merged.highest_id, recovered.max_producer_id())
            finally:
                txn_log.close()
        merged.highest_id = max(merged.highest_id, _highest_handed_out(source))
    _settle(merged, staged, now_ms())
    return merged


def _highest_handed_out(source: Source) -> int:
    """Every id the node handed out is below `offset + stride * block end`."""
    end, found = read_block_end(source.path / PRODUCER_IDS)
    if end is None:
        if any((source.path / name).exists() for name in NODE_FILES[:2]):
            log.warning(
                "old node's producer-ids file not read: ids it handed out that no log of the "
                "new owner holds are not known", path=str(source.path), found=found,
            )  # fmt: skip
        return -1
    return source.offset + source.stride * end


def _settle(
    merged: Merged,
    staged: dict[tuple[int, int], dict[str, dict[TopicPartition, OffsetValue]]],
    now_ms: int,
) -> None:
    """Transactions not ended: a prepared commit's offsets are committed here, and every
    `__consumer_offsets` participant dropped (those staged offsets are settled now); an
    ongoing one is fenced (PrepareAbort, epoch bumped); the markers are the new
    coordinator's to write at start."""
    for txn_id, m in list(merged.txns.items()):
        state = state_of(m)
        if state in moves.ENDED:
            m = replace(m, partitions=set(), offsets={})
        else:
            if state is TxnState.ONGOING:
                log.warning("transaction open at a change of --processes: aborted",
                            transactional_id=txn_id, producer_id=m.producer_id)  # fmt: skip
                m = moves.fence(m, now_ms)
            elif state is TxnState.PREPARE_COMMIT:
                for group, pending in m.offsets.items():
                    _commit(merged, group, {
                        tp: OffsetValue(o.offset, o.leader_epoch, o.metadata, now_ms)
                        for tp, o in pending.items()
                    })  # fmt: skip
                for group, values in staged.get((m.producer_id, m.producer_epoch), {}).items():
                    _commit(merged, group, {
                        tp: replace(v, commit_timestamp_ms=now_ms) for tp, v in values.items()
                    })  # fmt: skip
            # Neither participant kind names a log: `__consumer_offsets` (settled here) and
            # `__share_group_state` (staged share acknowledgements, in memory: gone at the
            # stop; with N = 1 a node's participant would be taken for a partition).
            partitions = {tp for tp in m.partitions if tp[0] not in (CONSUMER_OFFSETS, SHARE_STATE)}
            m = replace(m, partitions=partitions, offsets={})
        merged.txns[txn_id] = replace(m, txn=WHOLE, additions=0)


def _commit(merged: Merged, group: str, values: dict[TopicPartition, OffsetValue]) -> None:
    merged.offsets.setdefault(group, {}).update(values)


def write_node(
    merged: Merged,
    directory: Path,
    owner: Ownership,
    config: LogConfig,
    now_ms: Callable[[], int],
) -> None:
    """Node `owner.node_id`'s new files in `directory` (made here), every one synced: its
    groups' offsets, its transactional ids, and a producer-id block above every old id."""
    directory.mkdir(parents=True)
    offsets_dir = directory / f"{CONSUMER_OFFSETS}-0"
    offsets_log = SegmentLog.open(offsets_dir, config.with_overrides(OFFSETS_LOG_CONFIGS))
    try:
        store = OffsetStore(offsets_log, now_ms)
        for group, values in merged.offsets.items():
            if values and owner.coordinates(group):
                store.commit(group, values)
        if not owner.single:
            ShareGroupRecords(offsets_log, now_ms, owner.coordinates).record_all(
                sorted(merged.share_groups)
            )
    finally:
        offsets_log.close()  # synced
    txn_dir = directory / f"{TRANSACTION_STATE}-0"
    txn_log = SegmentLog.open(txn_dir, config.with_overrides(TRANSACTION_LOG_CONFIGS))
    try:
        writer = TransactionLog(txn_log, now_ms)
        for txn_id, m in merged.txns.items():
            if owner.coordinates(txn_id):
                writer.append(m)
    finally:
        txn_log.close()
    write_synced(directory / PRODUCER_IDS, str(first_block(merged.highest_id, owner)).encode())
    for d in (offsets_dir, txn_dir, directory):
        fsync_dir(d)


def first_block(highest_id: int, owner: Ownership) -> int:
    """The smallest k whose id `node + N * k` is above `highest_id` (the allocator's file
    counts k: `broker.producer_ids`)."""
    offset = 0 if owner.single else owner.node_id
    return 0 if highest_id < offset else (highest_id - offset) // owner.nodes + 1
