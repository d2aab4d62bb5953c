"""Share-partition state in the partition's own log, found again through snapshot files.

Writing: each SHARE_CHECKPOINT / SHARE_DELTA is one control batch appended to the log (durable
per the log's flush policy). A snapshot file per (partition, group) names the Share Checkpoint
Offset (SCO); it is written atomically and may lag behind the newest checkpoint: recovery reads
forward from it, and a later checkpoint of the same group supersedes an earlier one.

Recovery: from the snapshot's SCO (or, if the file is missing or stale, from the latest
checkpoint found by scanning the log) walk the batches forward, decode only control batches,
and apply the group's deltas of the current checkpoint epoch in order.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import structlog

from protocol.share_state import InvalidShareState
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import ShareStateRecord
from protocol.share_state import StateBatch
from protocol.share_state import decode_batch
from protocol.share_state import encode_control_batch
from protocol.share_state import next_epoch
from storage.errors import OffsetOutOfRange
from storage.fsutil import atomic_write
from storage.log import PartitionLog

log = structlog.get_logger("shoal.share_state")

SCAN_CHUNK_BYTES = 4 * 1024 * 1024
# Under the data dir: one directory of snapshot files per partition ("<topic>-<partition>").
SHARE_STATE_DIR = "__share_state"


@dataclass(slots=True)
class RecoveredState:
    """The share-partition state the log records, ready for SharePartition.restore()."""

    checkpoint_epoch: int
    checkpoint_offset: int  # the SCO
    last_offset: int  # offset of the newest record of the chain (the next BackOffset)
    chain_length: int  # deltas since the checkpoint
    start_offset: int
    end_offset: int
    states: list[StateBatch] = field(default_factory=list)
    damaged: bool = False  # some records could not be read: write a fresh checkpoint soon


def overwrite(states: list[StateBatch], new: tuple[StateBatch, ...]) -> list[StateBatch]:
    """`states` with every range of `new` written over it (both sorted, non-overlapping).

    Each new range finds the states it touches by bisection and replaces that slice, so a
    delta of k ranges costs O(k log n) plus list moves, whatever the window's size.
    """
    out = list(states)
    for n in new:
        lo = bisect.bisect_left(out, n.base_offset, key=lambda s: s.last_offset)
        hi = bisect.bisect_right(out, n.last_offset, key=lambda s: s.base_offset)
        pieces: list[StateBatch] = []
        if lo < hi and out[lo].base_offset < n.base_offset:
            first = out[lo]
            pieces.append(first._replace(last_offset=n.base_offset - 1))
        pieces.append(n)
        if lo < hi and out[hi - 1].last_offset > n.last_offset:
            last = out[hi - 1]
            pieces.append(last._replace(base_offset=n.last_offset + 1))
        out[lo:hi] = pieces
    return out


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a share snapshot file names: the group and its Share Checkpoint Offset (SCO)."""

    group_id: str
    checkpoint_offset: int
    checkpoint_epoch: int


SNAPSHOT_SUFFIX = ".snapshot"


def read_snapshot_file(path: Path) -> Snapshot | None:
    """The one parser of snapshot files; None when the file is missing or unreadable."""
    try:
        body = json.loads(path.read_text())
        return Snapshot(str(body["group_id"]), int(body["sco"]), int(body["checkpoint_epoch"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("unreadable share snapshot file", path=str(path))
        return None


def snapshot_groups(state_dir: Path) -> set[str]:
    """Groups with a snapshot file on some partition under `state_dir` (one directory each)."""
    if not state_dir.exists():
        return set()
    groups = set()
    for path in state_dir.glob(f"*/*{SNAPSHOT_SUFFIX}"):
        snapshot = read_snapshot_file(path)
        if snapshot is not None:
            groups.add(snapshot.group_id)
    return groups


def snapshot_keys(state_dir: Path) -> list[tuple[str, str, int]]:
    """(group, topic, partition) of every snapshot file under `state_dir`: the share-partitions
    with recorded state, known without reading any log."""
    if not state_dir.exists():
        return []
    keys = []
    for path in sorted(state_dir.glob(f"*/*{SNAPSHOT_SUFFIX}")):
        topic, _, partition = path.parent.name.rpartition("-")
        snapshot = read_snapshot_file(path)
        if snapshot is not None and topic and partition.isdigit():
            keys.append((snapshot.group_id, topic, int(partition)))
    return keys


class _Replay:
    """Applies one group's records in log order; notes what damage made it skip.

    Normally: the newest checkpoint, then the deltas of its epoch. When a checkpoint is
    unreadable, the deltas after it (the next epoch, chained to an offset never seen intact)
    are applied on top of the chain before it: every change is written as a delta or as the
    checkpoint that replaces one, so that loses only the changes the damaged record held, and
    those records are delivered again rather than lost. With no intact checkpoint at all
    (`baseless`), the window starts at `log_start` and the intact deltas are applied to it.
    """

    def __init__(self, log_start: int, *, baseless: bool) -> None:
        self.state: RecoveredState | None = None
        self._log_start = log_start
        self._baseless = baseless
        self.lost: list[str] = []

    def checkpoint(self, record: ShareCheckpoint, offset: int) -> None:
        # Log order decides which checkpoint is newest (epochs wrap at 65535); damage before
        # it no longer matters.
        self.lost.clear()
        self.state = RecoveredState(
            record.checkpoint_epoch, offset, offset, 0,
            record.start_offset, record.end_offset, list(record.states),
        )  # fmt: skip

    def delta(self, record: ShareDelta, offset: int) -> None:
        state = self.state
        if state is None:
            if not self._baseless:
                return
            self.lost.append(f"no intact checkpoint before the delta at {offset}")
            start = self._log_start
            state = self.state = RecoveredState(record.checkpoint_epoch, -1, -1, 0, start, start)
        elif record.checkpoint_epoch == next_epoch(state.checkpoint_epoch):
            self.lost.append(f"checkpoint at {record.back_offset} unreadable")
            state.checkpoint_epoch = record.checkpoint_epoch
        elif record.checkpoint_epoch != state.checkpoint_epoch:
            return  # a delta of a superseded chain
        elif state.last_offset >= 0 and record.back_offset != state.last_offset:
            self.lost.append(f"records between {state.last_offset} and {offset} unreadable")
        state.states = overwrite(state.states, record.states)
        if record.states:
            state.end_offset = max(state.end_offset, max(s.last_offset for s in record.states) + 1)
        state.last_offset = offset
        state.chain_length += 1


class ShareStateStore:
    """Share-state records and snapshot files of one partition log."""

    def __init__(self, plog: PartitionLog, snapshot_dir: Path | None) -> None:
        self._log = plog
        self._dir = snapshot_dir
        # Groups with an intact record in this log: found by one scan, kept up by append, so a
        # new group's recovery need not read every other group's records (1,000 groups joining
        # one partition cost 1,000 full scans before).
        self._recorded: set[str] | None = None

    def append(self, record: ShareStateRecord, now_ms: int) -> int:
        """Append one record as a control batch; its offset."""
        batch, header = encode_control_batch(record, now_ms)
        offset = self._log.append_control(batch, now_ms=now_ms, header=header).base_offset
        if self._recorded is not None:
            self._recorded.add(record.group_id)
        return offset

    def has_records(self, group_id: str) -> bool:
        """Whether the log holds an intact share-state record of the group."""
        if self._recorded is None:
            self._recorded = {r.group_id for _, r in self._records(self._log.log_start_offset)}
        return group_id in self._recorded

    def _snapshot_path(self, group_id: str) -> Path | None:
        if self._dir is None:
            return None
        return self._dir / f"{group_id.encode().hex()}{SNAPSHOT_SUFFIX}"

    def write_snapshot(self, group_id: str, checkpoint_offset: int, checkpoint_epoch: int) -> None:
        path = self._snapshot_path(group_id)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "group_id": group_id,
            "sco": checkpoint_offset,
            "checkpoint_epoch": checkpoint_epoch,
        }
        atomic_write(path, json.dumps(body).encode())

    def read_snapshot(self, group_id: str) -> int | None:
        """The group's SCO as its snapshot file names it, or None without a readable file."""
        path = self._snapshot_path(group_id)
        snapshot = read_snapshot_file(path) if path is not None else None
        return snapshot.checkpoint_offset if snapshot else None

    def snapshot_offsets(self) -> list[int]:
        """Every group's SCO on this partition: retention keeps control records from the lowest."""
        if self._dir is None or not self._dir.exists():
            return []
        snapshots = (read_snapshot_file(p) for p in self._dir.glob(f"*{SNAPSHOT_SUFFIX}"))
        return [s.checkpoint_offset for s in snapshots if s is not None]

    def delete_snapshot(self, group_id: str) -> None:
        path = self._snapshot_path(group_id)
        if path is not None:
            path.unlink(missing_ok=True)

    def _records(self, start: int) -> list[tuple[int, ShareStateRecord]]:
        """(offset, record) of every share-state record from `start` to the log end."""
        out: list[tuple[int, ShareStateRecord]] = []
        offset = max(start, self._log.log_start_offset)
        while offset < self._log.log_end_offset:
            try:
                data, spans = self._log.read_with_spans(offset, SCAN_CHUNK_BYTES)
            except OffsetOutOfRange:  # damage reads as an empty batch: stepped over below
                break
            if not spans:
                break
            for span in spans:
                if span.is_control and span.base_offset >= start:
                    batch = data[span.position_in_result : span.position_in_result + span.size]
                    try:
                        out.extend((span.base_offset, r) for r in decode_batch(batch))
                    except InvalidShareState as e:
                        log.warning(
                            "skipping unreadable share-state batch",
                            offset=span.base_offset,
                            error=str(e),
                        )
            offset = spans[-1].last_offset + 1
        return out

    def recover(self, group_id: str) -> RecoveredState | None:
        """The group's recorded state, or None when the log holds none.

        Reads forward from the snapshot's SCO; if that finds no intact checkpoint (a stale
        snapshot file, or damage), from the log start, where damage is stepped over.
        """
        log_start = self._log.log_start_offset
        sco = self.read_snapshot(group_id)
        if sco is None and not self.has_records(group_id):
            return None
        start = sco if sco is not None and sco >= log_start else log_start
        replay = self._replay(group_id, start, baseless=start == log_start)
        if replay.state is None and start > log_start:
            log.warning("no intact checkpoint at the snapshot's SCO; scanning the log",
                        group=group_id, sco=sco)  # fmt: skip
            replay = self._replay(group_id, log_start, baseless=True)
        if replay.lost and replay.state is not None:
            replay.state.damaged = True
            log.error(
                "share state recovered with damage: changes in unreadable records are lost "
                "and their records will be delivered again",
                group=group_id, damage=replay.lost,
            )  # fmt: skip
        return replay.state

    def _replay(self, group_id: str, start: int, *, baseless: bool) -> _Replay:
        replay = _Replay(self._log.log_start_offset, baseless=baseless)
        for offset, record in self._records(start):
            if record.group_id != group_id:
                continue
            if isinstance(record, ShareCheckpoint):
                replay.checkpoint(record, offset)
            else:
                replay.delta(record, offset)
        return replay

    def chain(self, group_id: str) -> list[tuple[int, ShareStateRecord]]:
        """The current checkpoint and its deltas, for tools (`shoal share-state dump`)."""
        state = self.recover(group_id)
        if state is None:
            return []
        return [
            (o, r)
            for o, r in self._records(state.checkpoint_offset)
            if r.group_id == group_id and r.checkpoint_epoch == state.checkpoint_epoch
        ]


__all__ = [
    "RecoveredState",
    "ShareCheckpoint",
    "ShareDelta",
    "ShareStateStore",
    "Snapshot",
    "overwrite",
    "read_snapshot_file",
    "snapshot_groups",
]
