"""Makes share-partition state durable: SHARE_CHECKPOINT and SHARE_DELTA records (seed 000).

After every operation that changes what a restart could not rebuild, the changed ranges are
appended to the partition's log as one SHARE_DELTA (ranges, never one record per offset),
chained to the previous record by BackOffset. A new SHARE_CHECKPOINT (epoch + 1) with the whole
window replaces the chain when it grows past `max_deltas` or when the window is empty (the
checkpoint is then a few dozen bytes). ACQUIRED is never written: `take_changes` already gives
acquired records as AVAILABLE with their count less one, and first deliveries past the recorded
end need no record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_partition import StateRange
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import StateBatch
from storage.share_state_store import ShareStateStore

log = structlog.get_logger("shoal.share_state")

MAX_EPOCH = 65535  # CheckpointEpoch is a uint16


@dataclass(slots=True)
class Chain:
    """Where a share-partition's records stand in its log."""

    epoch: int
    checkpoint_offset: int
    last_offset: int
    length: int
    snapshot_offset: int | None  # SCO the snapshot file names (it may lag)


def _batches(ranges: list[StateRange]) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(r.first_offset, r.last_offset, int(r.state), r.delivery_count) for r in ranges
    )


class ShareStatePersister:
    def __init__(
        self,
        store_for: Callable[[SharePartition], ShareStateStore | None],
        *,
        max_deltas: int = 100,
        snapshot_interval_ms: int = 1000,
    ) -> None:
        self._store_for = store_for
        self._max_deltas = max_deltas
        self._snapshot_interval_ms = snapshot_interval_ms
        self._chains: dict[tuple[str, object, int], Chain] = {}
        self._last_snapshot_ms = 0

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
            self.checkpoint(sp, now_ms, epoch=1, snapshot_now=True)
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
        log.info(
            "share-partition recovered",
            group=sp.group_id, topic_id=str(sp.topic_id), partition=sp.partition,
            spso=sp.spso, speo=sp.speo, epoch=state.checkpoint_epoch, deltas=state.chain_length,
        )  # fmt: skip

    def record(self, sp: SharePartition, changes: list[StateRange], now_ms: int) -> None:
        """Write `changes` (from `take_changes`): a delta, or a checkpoint when due."""
        chain = self._chains.get(self._key(sp))
        if chain is None or chain.length >= self._max_deltas or sp.spso == sp.speo:
            self.checkpoint(sp, now_ms)
            return
        store = self._store_for(sp)
        if store is None:
            return
        offset = store.append(
            ShareDelta(sp.group_id, chain.epoch, chain.last_offset, _batches(changes)), now_ms
        )
        chain.last_offset = offset
        chain.length += 1

    def checkpoint(
        self,
        sp: SharePartition,
        now_ms: int,
        *,
        epoch: int | None = None,
        snapshot_now: bool = False,
    ) -> None:
        """Write the whole window as a new checkpoint; the snapshot file follows (rate-limited)."""
        store = self._store_for(sp)
        if store is None:
            return
        sp.take_changes()
        key = self._key(sp)
        old = self._chains.get(key)
        if epoch is None:
            epoch = 1 if old is None else old.epoch % MAX_EPOCH + 1
        offset = store.append(
            ShareCheckpoint(sp.group_id, epoch, sp.spso, sp.speo, _batches(sp.state_ranges())),
            now_ms,
        )
        chain = self._chains[key] = Chain(
            epoch, offset, offset, 0, old.snapshot_offset if old else None
        )
        if (
            snapshot_now
            or chain.snapshot_offset is None
            or now_ms - self._last_snapshot_ms >= self._snapshot_interval_ms
        ):
            self._write_snapshot(store, sp.group_id, chain, now_ms)

    def _write_snapshot(
        self, store: ShareStateStore, group_id: str, chain: Chain, now_ms: int
    ) -> None:
        store.write_snapshot(group_id, chain.checkpoint_offset, chain.epoch)
        chain.snapshot_offset = chain.checkpoint_offset
        self._last_snapshot_ms = now_ms

    def flush_snapshots(self, partitions: list[SharePartition], now_ms: int) -> None:
        """Bring lagging snapshot files up to their newest checkpoint (a duty, and at shutdown)."""
        for sp in partitions:
            chain = self._chains.get(self._key(sp))
            store = self._store_for(sp)
            if (
                chain is not None
                and store is not None
                and chain.snapshot_offset != chain.checkpoint_offset
            ):
                self._write_snapshot(store, sp.group_id, chain, now_ms)

    def forget(self, sp: SharePartition) -> None:
        self._chains.pop(self._key(sp), None)

    def checkpoint_offset(self, sp: SharePartition) -> int | None:
        chain = self._chains.get(self._key(sp))
        return chain.checkpoint_offset if chain else None
