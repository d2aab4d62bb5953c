"""The on-disk PartitionLog: a directory of Kafka-named segment files.

``<dir>/00000000000000000000.log`` (+ ``.index``, ``.timeindex``) per segment,
``producer_state.json`` (idempotent-producer snapshot, written at roll and close) and
``log-start-offset-checkpoint`` (the log start DeleteRecords set, which may lie inside the first
segment; absent until the first DeleteRecords).

Whether the broker's logs were closed cleanly, and up to where each was synced otherwise (its
recovery point), is the data dir's to say (`storage.dir_checkpoints`, as Kafka's LogManager
keeps them): `open` is told. ``.clean_shutdown`` in the directory marks a log closed on its own
(`close`: tools and tests), and every log of a data dir written by older versions: it is
honoured once, then removed.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import shutil
from collections.abc import Generator
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import structlog

from protocol.record_batch import BatchHeader
from protocol.record_batch import ControlRecordType
from protocol.record_batch import InvalidRecordBatch
from protocol.txn_markers import marker_type
from storage.base_log import SegmentedLog
from storage.cleaned_segment import CLEANED
from storage.cleaned_segment import SWAP
from storage.cleaned_segment import CleanedCopy
from storage.cleaned_segment import FileCopy
from storage.cleaned_segment import finish_interrupted_cleaning
from storage.config import LogConfig
from storage.dir_checkpoints import LOG_CLEAN_SHUTDOWN
from storage.errors import CorruptRecords
from storage.fsutil import atomic_write
from storage.fsutil import fsync_dir
from storage.producer_state import ProducerStateManager
from storage.recovery import WALK_SLICE_BATCHES
from storage.recovery import RecoveryEvent
from storage.recovery import RecoveryStats
from storage.recovery import load_indexes
from storage.recovery import recover_segment_slices
from storage.recovery import run_through
from storage.sealed_segments import SEALED_SEGMENTS
from storage.sealed_segments import encode as encode_sealed
from storage.sealed_segments import read_sealed
from storage.segment import FileSegment
from storage.segment import PendingSync
from storage.segment import Segment
from storage.segment import write_files
from storage.segment_ranges import check_ranges

CLEAN_SHUTDOWN = LOG_CLEAN_SHUTDOWN
PRODUCER_SNAPSHOT = "producer_state.json"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
LOG_START_VERSION = 0

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)

_log = structlog.get_logger(__name__)


def _segment_bases(names: list[str]) -> list[int]:
    bases = []
    for name in names:
        stem, _, suffix = name.partition(".")
        if suffix == "log" and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _list(directory: Path) -> list[str]:
    """The directory's file names, once stray and interrupted work is cleared away (one
    listing: opening thousands of logs at start is mostly this)."""
    names = os.listdir(directory)
    strays = [n for n in names if n.endswith(".tmp")]
    for name in strays:
        (directory / name).unlink()
    if any(n.endswith((CLEANED, SWAP)) for n in names):
        for line in finish_interrupted_cleaning(directory):
            _log.warning("log_recovery", kind="cleaning", path=str(directory), detail=line)
    elif not strays:
        return names
    return os.listdir(directory)


@dataclass(slots=True)
class _Opening:
    """How one log is being opened: what the data dir says of it, and what it cost."""

    clean: bool
    recovery_point: int | None
    events: list[RecoveryEvent] = field(default_factory=list)
    stats: RecoveryStats = field(default_factory=RecoveryStats)
    sealed: bytes = b""  # what its `sealed-segments` file held
    has_log_start: bool = True  # a `log-start-offset-checkpoint` is in the listing


def _open_segments(
    directory: Path, names: list[str], config: LogConfig, opening: _Opening
) -> Generator[None, None, list[FileSegment]]:
    """The log's segments, yielding between slices of a recovery. A sealed one that its
    `sealed-segments` entry still describes is opened lazily (nothing read until it is used);
    the others are loaded now."""
    interval = config.index_interval_bytes
    bases = _segment_bases(names)
    if not bases:
        return [FileSegment(directory, 0, interval)]
    known, opening.sealed = read_sealed(directory, names)
    segments = []
    for base, sealed_end in itertools.pairwise(bases):
        segment = FileSegment(
            directory, base, interval, loader=functools.partial(_load_sealed, sealed_end)
        )
        entry = known.get(base)
        if entry is not None and entry.size == segment.size:
            segment.next_offset, segment.max_timestamp = entry.next_offset, entry.max_timestamp
        else:
            segment = FileSegment(directory, base, interval)
            # Sealed segments were fsynced with their indexes at roll; damage in one is
            # stepped over, and never costs the intact batches after it or the segments after.
            if not load_indexes(segment):
                yield from _recover(segment, opening, sealed_end)
        segments.append(segment)
    active = FileSegment(directory, bases[-1], interval)
    # The active segment's saved indexes are only trusted after a clean close; else only its
    # tail can be torn.
    if opening.clean and load_indexes(active):
        active.saved_size = active.size  # the clean close saved them
    else:
        yield from _recover(active, opening, None)
    segments.append(active)
    return segments


def _load_sealed(sealed_end: int, segment: FileSegment) -> None:
    """A lazily opened sealed segment, at its first use: its saved indexes, checked against its
    tail; else a scan that steps over damage (its lines said here)."""
    if load_indexes(segment):
        return
    later = _Opening(clean=False, recovery_point=None)
    run_through(_recover(segment, later, sealed_end))
    _say(later.events, rebuilt=True)


def _say(events: list[RecoveryEvent], *, rebuilt: bool) -> None:
    """One line per recovery event (`rebuilt`: index rebuilds too, else only counted)."""
    for event in events:
        if event.kind == "index_rebuilt" and not rebuilt:
            continue
        _log.warning(
            "log_recovery",
            kind=event.kind,
            path=event.path,
            position=event.position,
            detail=event.detail,
        )


def _recover(
    segment: FileSegment, opening: _Opening, sealed_end: int | None
) -> Generator[None, None, None]:
    """`recover_segment`, on a disk with no room for what it writes (the broker must start on
    a full disk, serve reads and refuse writes). The scan had finished: the segment is served
    as scanned, its indexes are rebuilt again at the next start, and a torn tail that could
    not be copied aside is cut without the copy, as Kafka's recovery cuts it."""
    events = opening.events
    try:
        yield from recover_segment_slices(
            segment, events, sealed_end,
            recovery_point=opening.recovery_point, stats=opening.stats,
        )  # fmt: skip
    except OSError as e:
        if e.errno not in _NO_SPACE:
            raise  # a read failed: what the scan learnt cannot be trusted
        path = str(segment.log_path)
        end = _valid_end(segment) if sealed_end is None else segment.size  # only it is cut
        if end < segment.size:  # the copy aside failed: nothing was cut yet
            events.append(RecoveryEvent("truncated", path, end, f"not saved aside: {e.strerror}"))
            segment.truncate(end)  # shrinking a file needs no space
            segment.flush()
        rebuilt = RecoveryEvent(
            "index_rebuilt", path, None, f"not saved: {e.strerror}; rebuilt again at next start"
        )
        if events and events[-1].kind == "index_rebuilt" and events[-1].path == path:
            events[-1] = rebuilt  # one line for the segment, saying what became of its indexes
        else:
            events.append(rebuilt)


def _valid_end(segment: FileSegment) -> int:
    """Where the last batch the scan kept ends."""
    if segment.next_offset == segment.base_offset:
        return 0
    found = segment.locate(segment.last_offset)
    assert found is not None
    return found[0] + found[1].size


class SegmentLog(SegmentedLog):
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[FileSegment],
        producers: tuple[ProducerStateManager, int],
        opening: _Opening,
    ) -> None:
        super().__init__(config, list[Segment](segments), producers[0])
        self.directory = directory
        self.name = str(directory)
        self.recovery_events = opening.events
        self.recovery_stats = opening.stats
        self.clean = opening.clean  # opened after a clean close: nothing was recovered
        self._snapshot_offset = producers[1]  # the log end the producer snapshot file covers
        self._sealed_saved = opening.sealed  # what `sealed-segments` holds
        self._closed = False
        if opening.has_log_start:  # (a failed open per partition, else: most have none)
            self._log_start = _load_log_start(
                directory, self._log_start, self.log_end_offset, opening.events
            )

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        clean: bool = False,
        recovery_point: int | None = None,
    ) -> SegmentLog:
        """Open (or create) the log in ``directory``, recovering it if needed.

        ``clean``: the data dir says the log was closed cleanly (nothing is checked past the
        saved indexes). Otherwise its active segment is checked from ``recovery_point`` (the
        offset below which the log was synced; None: from its start) to its end.
        """
        return run_through(
            cls.opening(directory, config, clean=clean, recovery_point=recovery_point)
        )

    @classmethod
    def opening(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        clean: bool = False,
        recovery_point: int | None = None,
    ) -> Generator[None, None, SegmentLog]:
        """`open`, yielding between slices of its checks (the log it returns): after kill -9
        the active segment is checked past its recovery point, up to a whole segment, which a
        caller on the event loop must not do in one go."""
        config = config or LogConfig()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        names = _list(path)
        marker = path / CLEAN_SHUTDOWN  # this log alone closed cleanly (see the module doc)
        legacy = CLEAN_SHUTDOWN in names
        opening = _Opening(clean or legacy, None if clean or legacy else recovery_point)
        opening.has_log_start = LOG_START_CHECKPOINT in names
        segments = yield from _open_segments(path, names, config, opening)
        missing = check_ranges(segments)  # before anything trusts the segments' offsets
        producers = yield from _load_producers(path, segments, opening.events)
        if legacy:
            marker.unlink()
            fsync_dir(path)
        log = cls(path, config, segments, producers, opening)
        log.missing = missing
        log._set_durable(opening)
        _say(opening.events, rebuilt=False)  # rebuilds counted: LogManager says how many
        return log

    def _set_durable(self, opening: _Opening) -> None:
        """The recovery point after open: the log end after a clean close; else the saved one
        (what was past it was checked but may never have been synced: the next flush does)."""
        active = self._segments[-1]
        end = active.next_offset
        durable = end
        if not opening.clean:
            saved = opening.recovery_point if opening.recovery_point is not None else 0
            durable = max(active.base_offset, min(saved, end))
        active.durable_offset = durable
        if durable < end:
            active.dirty = True

    def _new_segment(self, base_offset: int) -> Segment:
        segment = FileSegment(self.directory, base_offset, self.config.index_interval_bytes)
        fsync_dir(self.directory)
        return segment

    def _after_roll(self) -> None:
        self._save_producers()

    def cleaning_copy(self, segment: Segment) -> CleanedCopy:
        assert isinstance(segment, FileSegment)
        return FileCopy(segment)

    def _after_producers_changed(self) -> None:
        self._save_producers()

    def _save_log_start(self, offset: int) -> None:
        data = f"{LOG_START_VERSION}\n{offset}\n".encode()
        atomic_write(self.directory / LOG_START_CHECKPOINT, data)

    def _save_producers(self) -> None:
        end = self.log_end_offset
        atomic_write(self.directory / PRODUCER_SNAPSHOT, self._producers.to_json(end))
        self._snapshot_offset = end
        self._producers.expired = False

    def start_close(self) -> LogClose:
        """What closing the log still has to do on disk: run it anywhere (`LogClose.run`),
        then `finish_close` here. Only what changed since it was opened is written: a log
        nobody wrote to costs no write and no sync."""
        active = self._segments[-1]
        files: list[tuple[Path, bytes | None]] = []
        caches: list[tuple[Path, bytes | None]] = []
        if active.saved_size != active.size and isinstance(active, FileSegment):
            active.time_index.maybe_append(active.max_timestamp, active.max_timestamp_offset)
            files, caches = active.index_files(caches=False), active.cache_files()
        end = self.log_end_offset
        if end != self._snapshot_offset or self._producers.expired:
            files.append((self.directory / PRODUCER_SNAPSHOT, self._producers.to_json(end)))
        # Sealed segments were synced at their seal (else they are dirty); the active one is
        # synced up to the log end whoever cleared its dirty flag: a flush under way may be
        # stopped before it reaches it (`sync_all`).
        syncs = [p for s in self._segments[:-1] if (p := s.start_flush()) is not None]
        if (last := active.close_sync()) is not None:
            syncs.append(last)
        sealed = encode_sealed(self._segments[:-1])
        if sealed != self._sealed_saved:
            caches.append((self.directory / SEALED_SEGMENTS, sealed))
        return LogClose(syncs, files, caches, end, sealed)

    def finish_close(self, done: LogClose | None) -> None:
        """Release the log's files; `done`: its `LogClose` ran to the end (all synced)."""
        if done is not None:
            active = self._segments[-1]
            active.durable_offset = max(active.durable_offset, done.end)
            active.saved_size = active.size
            self._snapshot_offset = done.end
            self._sealed_saved = done.sealed
        for segment in self._segments:
            segment.close()
        self._closed = True

    def close(self) -> None:
        """Seal, sync, snapshot, then mark this one log's clean shutdown in its directory (a
        log closed on its own: tools, tests; the broker closes its logs through `LogManager`,
        which marks the whole data dir instead).

        :raises OSError: no room for the indexes or the snapshot (a full disk), or a failed
            sync: the log is closed all the same, unmarked, so the next open checks it.
        """
        if self._closed:
            return
        done = None
        try:
            closing = self.start_close()
            closing.run()
            done = closing
        finally:
            self.finish_close(done)
        atomic_write(self.directory / CLEAN_SHUTDOWN, b"")

    def delete(self) -> None:
        self.drop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def drop(self) -> None:
        """Close the files, writing nothing: another process deleted the log's topic (and
        renamed its directory away: `LogManager.refresh_topics`)."""
        for segment in self._segments:
            segment.close()
        self._closed = True


@dataclass(slots=True)
class LogClose:
    """The disk work of closing one log, by path (no shared descriptor): safe in any thread,
    and the many logs of a data dir close in parallel (their fsyncs release the GIL)."""

    syncs: list[PendingSync]
    files: list[tuple[Path, bytes | None]]
    caches: list[tuple[Path, bytes | None]]  # written unsynced (`FileSegment.cache_files`)
    end: int  # the log end: its recovery point once this has run
    sealed: bytes  # its `sealed-segments` file, as it is now

    def run(self) -> None:
        """Sync the data first, then the files that describe it.

        :raises OSError: a sync or a write failed.
        """
        for sync in self.syncs:
            error = sync.run()
            if error is not None:
                sync.segment.dirty = True
                raise error
        write_files(self.files)
        write_files(self.caches, synced=False)  # caches: never fail the close


def _load_producers(
    directory: Path, segments: list[FileSegment], events: list[RecoveryEvent]
) -> Generator[None, None, tuple[ProducerStateManager, int]]:
    """Snapshot + a header walk of what was appended after it (or of the whole log); and the
    log end the snapshot file covered (-1: none was read)."""
    start, end = segments[0].base_offset, segments[-1].next_offset
    path = directory / PRODUCER_SNAPSHOT
    state, covered, saved = ProducerStateManager(), start, -1
    try:
        state, covered = ProducerStateManager.from_json(path.read_bytes())
        saved = covered
    except FileNotFoundError:
        pass
    except (OSError, ValueError, TypeError, KeyError) as exc:
        events.append(RecoveryEvent("snapshot_discarded", str(path), None, repr(exc)))
    if not start <= covered <= end:
        # Recovery cut the log below the snapshot: it describes batches that are gone.
        events.append(RecoveryEvent("snapshot_discarded", str(path), None, f"offset {covered}"))
        state, covered, saved = ProducerStateManager(), start, -1
    for segment in segments:
        if segment.next_offset > covered:
            yield from _replay(state, segment, covered, events)
    return state, saved


def _replay(
    state: ProducerStateManager,
    segment: FileSegment,
    covered: int,
    events: list[RecoveryEvent],
) -> Generator[None, None, None]:
    """The segment's batches from `covered` on, into the producer state (by their headers)."""
    try:
        found = segment.locate(covered) if covered >= segment.base_offset else None
    except CorruptRecords:  # `covered` lies in damage: walk the segment, stepping over it
        found = None
    for n, (position, header) in enumerate(segment.iter_headers(found[0] if found else 0), 1):
        if n % WALK_SLICE_BATCHES == 0:
            yield
        if header.base_offset < covered:
            continue
        if header.is_control and header.producer_id >= 0:
            _replay_marker(state, segment, position, header, events)
        else:
            state.update(header, header.base_offset)


def _replay_marker(
    state: ProducerStateManager,
    segment: FileSegment,
    position: int,
    header: BatchHeader,
    events: list[RecoveryEvent],
) -> None:
    """A transaction marker met by the recovery walk ends its transaction again (Kafka's
    LogLoader rebuilds producer state and the .txnindex from the batches after the snapshot).
    Its type is in its one record: the only bytes besides headers this walk reads."""
    try:
        kind = marker_type(segment.read(position, header.size))
    except (InvalidRecordBatch, OSError) as exc:
        events.append(
            RecoveryEvent("marker_unreadable", str(segment.log_path), position, repr(exc))
        )
        return
    if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        commit = kind == ControlRecordType.COMMIT
        state.end_txn(header.producer_id, header.producer_epoch, commit, header.base_offset)


def _load_log_start(
    directory: Path, first_base: int, log_end: int, events: list[RecoveryEvent]
) -> int:
    """The saved log start, kept within [first segment's base, log end]; the first segment's
    base when there is no file (a log DeleteRecords never moved) or it cannot be read."""
    path = directory / LOG_START_CHECKPOINT
    try:
        version, offset = path.read_text().split()
        if int(version) != LOG_START_VERSION:
            raise ValueError(f"version {version}")
        saved = int(offset)
    except FileNotFoundError:
        return first_base
    except (OSError, ValueError) as exc:
        events.append(RecoveryEvent("log_start_discarded", str(path), None, repr(exc)))
        return first_base
    if saved > log_end:  # recovery cut the log below it: nothing past the end can be deleted
        events.append(RecoveryEvent("log_start_lowered", str(path), None, f"{saved} > {log_end}"))
        return log_end
    return max(saved, first_base)
