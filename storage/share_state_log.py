"""Share-partition state as records in the partition's own log: SHARE_CHECKPOINT and
SHARE_DELTA chains (seed 000), the log-format half of the share core's Persister.

It takes plain data (share-partition keys, offsets, `StateBatch` ranges: the records' own
form) and knows nothing of the share core's windows or plans;
`broker/share/share_state_persister.py` is the Persister over it.
Two-phase, as Kafka's share code: a planned change is written first (`write_change` appends
the ranges it will change as one SHARE_DELTA, never one record per offset, chained to the
previous record by BackOffset) and applied in memory only after. A write that fails raises
`KafkaStorageError` and the plan is dropped, so memory is never ahead of the log.

When the chain grows past `max_deltas`, or when the change empties the window, the change is
written as a new SHARE_CHECKPOINT (epoch + 1) of the whole window as it will be after the
change, which replaces the chain. ACQUIRED is never written: an acquired record is recorded as
AVAILABLE with its count less one, and first deliveries past the recorded end need no record.

Snapshot files (the SCO of each share-partition) are written off the event loop by a broker
duty (`due_snapshots`); they may lag, and recovery reads forward from them. The earliest SCO of
each partition (`earliest_share_offsets`) bounds what retention may delete.

This is the one place that writes share-state records.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import uuid
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import structlog

from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import StateBatch
from protocol.share_state import next_epoch
from storage.errors import StorageError
from storage.log import PartitionLog
from storage.share_state_store import RecoveredState
from storage.share_state_store import ShareStateStore
from storage.share_state_store import snapshot_groups
from storage.share_state_store import snapshot_keys
from storage.topics import TopicInfo

log = structlog.get_logger("shoal.share_state")

ShareKey = tuple[str, uuid.UUID, int]
"""(group id, topic id, partition): one share-partition."""

Window = tuple[int, tuple[StateBatch, ...]]
"""SPSO and the durable ranges from it on: what a checkpoint records."""


class PartitionLogs(Protocol):
    """The lookups the share state needs (LogManager and MemoryLogs have them)."""

    def topics(self) -> Sequence[TopicInfo]: ...
    def topic(self, name: str) -> TopicInfo | None: ...
    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...
    def log(self, topic: str, partition: int) -> PartitionLog | None: ...


@dataclass(frozen=True, slots=True)
class RecordedWindow:
    """A share-partition's window as recorded, never starting below the log start."""

    start_offset: int
    end_offset: int
    batches: tuple[StateBatch, ...]


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
    written: Callable[[str], None] = lambda group_id: None  # told the group has a snapshot
    # Whether the share-partition still has this chain: a DeleteGroups may delete it between
    # the duty's listing and this write, or while the file is written in a thread.
    current: Callable[[], bool] = lambda: True

    def run(self) -> None:
        self.store.write_snapshot(self.group_id, self.offset, self.chain.epoch)

    def done(self) -> None:
        if not self.current():  # deleted meanwhile: the file just written would bring it back
            self.store.delete_snapshot(self.group_id)
            return
        self.chain.snapshot_offset = self.offset
        self.written(self.group_id)


def _from(batches: Sequence[StateBatch], start: int) -> tuple[StateBatch, ...]:
    """Recorded batches from `start` on, those below cut off (SPSO moved past them)."""
    return tuple(
        b._replace(base_offset=max(b.base_offset, start)) for b in batches if b.last_offset >= start
    )


class ShareStateLog:
    """Share state as SHARE_CHECKPOINT / SHARE_DELTA records in each partition's own log, with
    snapshot files under `state_dir` (None: no snapshot files; recovery scans the log)."""

    def __init__(
        self, logs: PartitionLogs, state_dir: Path | None = None, *, max_deltas: int = 100
    ) -> None:
        self._logs = logs
        self._state_dir = state_dir
        self._max_deltas = max_deltas
        self._stores: dict[tuple[uuid.UUID, int], ShareStateStore] = {}
        self._chains: dict[ShareKey, Chain] = {}
        # `groups()`, read from the snapshot files once and kept up to date (None: read again).
        # DescribeGroups asks it of every group id it names: a million file scans, before.
        self._groups: frozenset[str] | None = None

    def _store(self, key: ShareKey) -> ShareStateStore | None:
        return self._partition_store(key[1], key[2])

    def _partition_store(self, topic_id: uuid.UUID, partition: int) -> ShareStateStore | None:
        """The share-state records and snapshot files of one partition; None if it is gone."""
        store = self._stores.get((topic_id, partition))
        if store is None:
            topic = self._logs.topic_by_id(topic_id)
            plog = self._logs.log(topic.name, partition) if topic else None
            if topic is None or plog is None:
                return None
            snapshots = self._state_dir / f"{topic.name}-{partition}" if self._state_dir else None
            store = self._stores[(topic_id, partition)] = ShareStateStore(plog, snapshots)
        return store

    # -- the records --------------------------------------------------------------

    def initialise(self, key: ShareKey, start_offset: int, now_ms: int) -> None:
        """Record an empty window at `start_offset` as a new checkpoint.

        :raises storage.errors.KafkaStorageError:
        """
        self._write_checkpoint(key, start_offset, start_offset, (), now_ms)

    def read_window(
        self, key: ShareKey, log_start_offset: int, now_ms: int
    ) -> RecordedWindow | None:
        """The recorded window (never starting below `log_start_offset`), or None if there is
        none. A record found damaged is stepped over, and the state read is written afresh so
        the next read does not meet the damage again."""
        store = self._store(key)
        state = store.recover(key[0]) if store is not None else None
        if state is None:
            self._chains.pop(key, None)
            return None
        start = max(state.start_offset, log_start_offset)
        recorded = RecordedWindow(start, max(state.end_offset, start), _from(state.states, start))
        self._chains[key] = Chain(
            state.checkpoint_epoch,
            state.checkpoint_offset,
            state.last_offset,
            state.chain_length,
            None,
        )
        if state.damaged:  # the next recovery should not have to step over the damage again
            with contextlib.suppress(StorageError):
                self._write_checkpoint(
                    key, recorded.start_offset, recorded.end_offset, recorded.batches, now_ms
                )
        _log_recovered(key, recorded, state)
        return recorded

    def write_change(
        self,
        key: ShareKey,
        batches: tuple[StateBatch, ...],
        *,
        end_offset: int,
        empties: bool,
        after: Callable[[], Window],
        now_ms: int,
    ) -> int | None:
        """Make a planned change durable before it is applied: a delta of `batches`, or a
        checkpoint when due (the chain is long, or the change `empties` the window: nothing
        stays open). `after` is the window once the change is applied, asked for only when a
        checkpoint of a window that stays open is due (it costs O(window)). The offset of the
        record written (None: nothing written).

        :raises storage.errors.KafkaStorageError: nothing was written; drop the plan.
        """
        if not batches:
            return None
        chain = self._chains.get(key)
        if chain is not None and chain.length < self._max_deltas and not empties:
            store = self._store(key)
            if store is None:
                return None
            offset = store.append(
                ShareDelta(key[0], chain.epoch, chain.last_offset, batches), now_ms
            )
            chain.last_offset = offset
            chain.length += 1
            return offset
        if empties:
            return self.write_emptied(key, end_offset, now_ms)
        start, states = after()
        return self._write_checkpoint(key, start, end_offset, states, now_ms)

    def write_emptied(self, key: ShareKey, end_offset: int, now_ms: int) -> int | None:
        """`write_change` of a change that empties the window (a consumer at the log end
        acknowledging all it holds: each ACCEPT at a steady rate), its ranges not needed: a
        checkpoint of the empty window at `end_offset`, as it will be. The offset written.

        :raises storage.errors.KafkaStorageError: nothing was written; drop the plan.
        """
        return self._write_checkpoint(key, end_offset, end_offset, (), now_ms)

    def write_window(
        self, key: ShareKey, start_offset: int, end_offset: int, batches: tuple[StateBatch, ...],
        now_ms: int,
    ) -> None:  # fmt: skip
        """The window as a new checkpoint (epoch + 1), so its SCO lies above a log start that
        is about to move (seed 000: nothing removes share state at or after the ESO).

        :raises storage.errors.KafkaStorageError: nothing was written.
        """
        self._write_checkpoint(key, start_offset, end_offset, batches, now_ms)

    def delete(self, key: ShareKey, start_offset: int, now_ms: int) -> None:
        """A last, empty checkpoint at `start_offset` (a tombstone: recovery would otherwise
        find the old records in the log), and no snapshot file, so retention is not held back.

        :raises storage.errors.KafkaStorageError: the tombstone was not written; nothing changed.
        """
        store = self._store(key)
        if store is None:
            self._chains.pop(key, None)
            return
        group_id = key[0]
        state = store.recover(group_id)  # the partition may not be loaded: ask its log
        if state is not None:
            epoch = next_epoch(state.checkpoint_epoch)
            store.append(ShareCheckpoint(group_id, epoch, start_offset, start_offset, ()), now_ms)
        self._chains.pop(key, None)
        store.delete_snapshot(group_id)
        self._groups = None  # the group may have snapshots on other partitions

    def has_state(self, key: ShareKey) -> bool:
        store = self._store(key)
        return store is not None and store.read_snapshot(key[0]) is not None

    def groups(self) -> frozenset[str]:
        if self._state_dir is None:
            return frozenset()
        if self._groups is None:
            self._groups = frozenset(snapshot_groups(self._state_dir))
        return self._groups

    def _snapshot_written(self, group_id: str) -> None:
        if self._groups is not None and group_id not in self._groups:
            self._groups = self._groups | {group_id}

    def recorded(self) -> list[ShareKey]:
        out = []
        for group_id, name, partition in snapshot_keys(self._state_dir) if self._state_dir else []:
            topic = self._logs.topic(name)
            if topic is not None and partition < topic.partitions:
                out.append((group_id, topic.topic_id, partition))
        return out

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        self._groups = None
        for key in [k for k in self._chains if k[1] == topic_id]:
            del self._chains[key]
        for store_key in [k for k in self._stores if k[0] == topic_id]:
            del self._stores[store_key]
        if self._state_dir is not None:
            for path in self._state_dir.glob(f"{topic}-*"):
                if path.name.rpartition("-")[0] == topic:
                    shutil.rmtree(path, ignore_errors=True)

    # -- checkpoints ------------------------------------------------------------------------------

    def _write_checkpoint(
        self,
        key: ShareKey,
        start: int,
        end: int,
        states: tuple[StateBatch, ...],
        now_ms: int,
    ) -> int | None:
        store = self._store(key)
        if store is None:
            return None
        old = self._chains.get(key)
        epoch = 1 if old is None else next_epoch(old.epoch)
        offset = store.append(ShareCheckpoint(key[0], epoch, start, end, states), now_ms)
        self._chains[key] = Chain(epoch, offset, offset, 0, old.snapshot_offset if old else None)
        return offset

    def checkpoint_offset(self, key: ShareKey) -> int | None:
        chain = self._chains.get(key)
        return chain.checkpoint_offset if chain else None

    # -- snapshot files and retention (broker duties) ---------------------------------------------

    def due_snapshots(self) -> list[SnapshotWrite]:
        """Snapshot files behind their newest checkpoint (written by `SnapshotWrite.run`)."""
        due = []
        for key, chain in self._chains.items():
            store = self._store(key)
            if store is not None and chain.snapshot_offset != chain.checkpoint_offset:
                offset = chain.checkpoint_offset
                current = functools.partial(self._holds, key, chain)
                due.append(
                    SnapshotWrite(store, key[0], chain, offset, self._snapshot_written, current)
                )
        return due

    def _holds(self, key: ShareKey, chain: Chain) -> bool:
        return self._chains.get(key) is chain

    def flush_snapshots(self) -> list[tuple[str, OSError]]:
        """Bring lagging snapshot files up to their newest checkpoint, here and now (shutdown).

        A file that cannot be written (a full disk) keeps its older SCO, which recovery reads
        forward from: the others are written all the same. Returns (group, error) of those.
        """
        failed = []
        for write in self.due_snapshots():
            try:
                write.run()
            except OSError as e:
                failed.append((write.group_id, e))
                continue
            write.done()
        return failed

    def earliest_share_offsets(self) -> dict[tuple[str, int], int]:
        """ESO per partition: the lowest SCO of any group; retention and cleaning keep control
        records from it on."""
        eso: dict[tuple[str, int], int] = {}
        if self._state_dir is None:
            return eso
        pending = self._unsnapshotted()
        for topic in self._logs.topics():
            for p in range(topic.partitions):
                offset = self._earliest(topic.topic_id, p, pending)
                if offset is not None:
                    eso[(topic.name, p)] = offset
        return eso

    def earliest_share_offset(self, topic: str, partition: int) -> int | None:
        """One partition's ESO; None when no group has share state there."""
        info = self._logs.topic(topic) if self._state_dir is not None else None
        return self._earliest(info.topic_id, partition, self._unsnapshotted()) if info else None

    def _unsnapshotted(self) -> dict[tuple[uuid.UUID, int], int]:
        """Per partition, the lowest checkpoint that no snapshot file names yet (the duty lags,
        or its write failed): after a restart a scan from the log start finds it, so it
        bounds the ESO as a snapshot file would."""
        lowest: dict[tuple[uuid.UUID, int], int] = {}
        for (_, topic_id, p), chain in self._chains.items():
            if chain.snapshot_offset is None:
                at = (topic_id, p)
                lowest[at] = min(lowest.get(at, chain.checkpoint_offset), chain.checkpoint_offset)
        return lowest

    def _earliest(
        self, topic_id: uuid.UUID, partition: int, pending: dict[tuple[uuid.UUID, int], int]
    ) -> int | None:
        store = self._partition_store(topic_id, partition)
        offsets = store.snapshot_offsets() if store else []
        if (topic_id, partition) in pending:
            offsets.append(pending[(topic_id, partition)])
        return min(offsets) if offsets else None


def _log_recovered(key: ShareKey, recorded: RecordedWindow, state: RecoveredState) -> None:
    group_id, topic_id, partition = key
    # Debug: a start loads thousands at once, and says so in one line (`load_recorded`).
    log.debug(
        "share-partition recovered",
        group=group_id, topic_id=str(topic_id), partition=partition,
        spso=recorded.start_offset, speo=recorded.end_offset,
        epoch=state.checkpoint_epoch, deltas=state.chain_length,
    )  # fmt: skip
