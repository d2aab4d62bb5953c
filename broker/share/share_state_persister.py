"""Makes share-partition state durable: SHARE_CHECKPOINT and SHARE_DELTA records (seed 000).

Two-phase, as Kafka's share code: the manager plans a change (`SharePartition.plan_*`), `write`
appends the ranges it will change as one SHARE_DELTA (ranges, never one record per offset),
chained to the previous record by BackOffset, and only then is the plan applied. A write that
fails raises `KafkaStorageError` and the plan is dropped, so memory is never ahead of the log.

When the chain grows past `max_deltas`, or when the change empties the window, the change is
written as a new SHARE_CHECKPOINT (epoch + 1) of the whole window as it will be after the
change, which replaces the chain. ACQUIRED is never written: an acquired record is recorded as
AVAILABLE with its count less one, and first deliveries past the recorded end need no record.

Snapshot files (the SCO of each share-partition) are written off the event loop by a broker
duty (`due_snapshots`); they may lag, and recovery reads forward from them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_partition import StateRange
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import StateBatch
from storage.errors import StorageError
from storage.share_state_store import ShareStateStore
from storage.share_state_store import next_epoch
from storage.share_state_store import overwrite

log = structlog.get_logger("shoal.share_state")


@dataclass(slots=True)
class Chain:
    """Where a share-partition's records stand in its log."""

    epoch: int
    checkpoint_offset: int
    last_offset: int
    length: int
    snapshot_offset: int | None  # SCO the snapshot file names (it may lag)


@dataclass(slots=True)
class SnapshotWrite:
    """One snapshot file to bring up to `offset`: `run` may go to a thread, `done` may not."""

    store: ShareStateStore
    group_id: str
    chain: Chain
    offset: int

    def run(self) -> None:
        self.store.write_snapshot(self.group_id, self.offset, self.chain.epoch)

    def done(self) -> None:
        self.chain.snapshot_offset = self.offset


def _batches(ranges: Sequence[StateRange]) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(r.first_offset, r.last_offset, int(r.state), r.delivery_count) for r in ranges
    )


def _empties(sp: SharePartition, changes: Sequence[StateRange]) -> bool:
    """Whether applying `changes` leaves no record open in the window. A plan only changes
    records that are open now, so the window empties when its terminal changes cover them all."""
    terminal = sum(c.last_offset - c.first_offset + 1 for c in changes if c.state.is_terminal)
    return terminal == sp.open_records()


def _window_after(
    sp: SharePartition, changes: Sequence[StateRange]
) -> tuple[int, tuple[StateBatch, ...]]:
    """SPSO and durable ranges of the window once `changes` are applied (for a checkpoint)."""
    states = overwrite(list(_batches(sp.state_ranges())), _batches(changes))
    merged: list[StateBatch] = []
    for b in states:
        p = merged[-1] if merged else None
        if p and p.state == b.state and p.delivery_count == b.delivery_count:
            merged[-1] = StateBatch(p.base_offset, b.last_offset, p.state, p.delivery_count)
        else:
            merged.append(b)
    k = 0
    while k < len(merged) and RecordState(merged[k].state).is_terminal:
        k += 1
    start = merged[k].base_offset if k < len(merged) else sp.speo
    return start, tuple(merged[k:])


class ShareStatePersister:
    def __init__(
        self,
        store_for: Callable[[SharePartition], ShareStateStore | None],
        *,
        max_deltas: int = 100,
    ) -> None:
        self._store_for = store_for
        self._max_deltas = max_deltas
        self._chains: dict[tuple[str, object, int], Chain] = {}

    @staticmethod
    def _key(sp: SharePartition) -> tuple[str, object, int]:
        return (sp.group_id, sp.topic_id, sp.partition)

    def initialise(self, sp: SharePartition, log_start: int, now_ms: int) -> None:
        """Restore `sp` from its log, or record its starting point if the log has none."""
        store = self._store_for(sp)
        if store is None:
            return
        state = store.recover(sp.group_id)
        if state is None:
            self.checkpoint(sp, now_ms, epoch=1)
            return
        start = max(state.start_offset, log_start)
        sp.restore(
            start,
            max(state.end_offset, start),
            [
                StateRange(b.base_offset, b.last_offset, RecordState(b.state), b.delivery_count)
                for b in state.states
            ],
        )
        sp.take_changes()
        self._chains[self._key(sp)] = Chain(
            state.checkpoint_epoch,
            state.checkpoint_offset,
            state.last_offset,
            state.chain_length,
            None,
        )
        if state.damaged:  # the next recovery should not have to step over the damage again
            with contextlib.suppress(StorageError):
                self.checkpoint(sp, now_ms)
        log.info(
            "share-partition recovered",
            group=sp.group_id, topic_id=str(sp.topic_id), partition=sp.partition,
            spso=sp.spso, speo=sp.speo, epoch=state.checkpoint_epoch, deltas=state.chain_length,
        )  # fmt: skip

    def write(self, sp: SharePartition, changes: Sequence[StateRange], now_ms: int) -> None:
        """Make a planned change durable before it is applied: a delta, or a checkpoint when due.

        :raises storage.errors.KafkaStorageError: nothing was written; drop the plan.
        """
        if not changes:
            return
        chain = self._chains.get(self._key(sp))
        if chain is not None and chain.length < self._max_deltas and not _empties(sp, changes):
            store = self._store_for(sp)
            if store is None:
                return
            offset = store.append(
                ShareDelta(sp.group_id, chain.epoch, chain.last_offset, _batches(changes)), now_ms
            )
            chain.last_offset = offset
            chain.length += 1
            return
        start, states = _window_after(sp, changes)
        self._write_checkpoint(sp, start, sp.speo, states, now_ms)

    def checkpoint(self, sp: SharePartition, now_ms: int, *, epoch: int | None = None) -> None:
        """Write the whole window as it is now as a new checkpoint.

        :raises storage.errors.KafkaStorageError:
        """
        sp.take_changes()
        self._write_checkpoint(sp, sp.spso, sp.speo, _batches(sp.state_ranges()), now_ms, epoch)

    def write_reset(self, sp: SharePartition, start_offset: int, now_ms: int) -> None:
        """Record an empty window at `start_offset` before `sp.reset(start_offset)` (admin reset).

        :raises storage.errors.KafkaStorageError:
        """
        self._write_checkpoint(sp, start_offset, start_offset, (), now_ms)

    def _write_checkpoint(
        self,
        sp: SharePartition,
        start: int,
        end: int,
        states: tuple[StateBatch, ...],
        now_ms: int,
        epoch: int | None = None,
    ) -> None:
        store = self._store_for(sp)
        if store is None:
            return
        key = self._key(sp)
        old = self._chains.get(key)
        if epoch is None:
            epoch = 1 if old is None else next_epoch(old.epoch)
        offset = store.append(ShareCheckpoint(sp.group_id, epoch, start, end, states), now_ms)
        self._chains[key] = Chain(epoch, offset, offset, 0, old.snapshot_offset if old else None)

    def due_snapshots(self, partitions: list[SharePartition]) -> list[SnapshotWrite]:
        """Snapshot files behind their newest checkpoint (written by `write_snapshots`)."""
        due = []
        for sp in partitions:
            chain = self._chains.get(self._key(sp))
            store = self._store_for(sp)
            if (
                chain is not None
                and store is not None
                and chain.snapshot_offset != chain.checkpoint_offset
            ):
                due.append(SnapshotWrite(store, sp.group_id, chain, chain.checkpoint_offset))
        return due

    def flush_snapshots(self, partitions: list[SharePartition], now_ms: int) -> None:
        """Bring lagging snapshot files up to their newest checkpoint, here and now (shutdown)."""
        for write in self.due_snapshots(partitions):
            write.run()
            write.done()

    def forget(self, sp: SharePartition) -> None:
        self._chains.pop(self._key(sp), None)

    def checkpoint_offset(self, sp: SharePartition) -> int | None:
        chain = self._chains.get(self._key(sp))
        return chain.checkpoint_offset if chain else None
