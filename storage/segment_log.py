"""The on-disk PartitionLog: a directory of Kafka-named segment files.

``<dir>/00000000000000000000.log`` (+ ``.index``, ``.timeindex``) per segment,
``producer_state.json`` (idempotent-producer snapshot, written at roll and close),
``log-start-offset-checkpoint`` (the log start DeleteRecords set, which may lie inside the first
segment; absent until the first DeleteRecords) and ``.clean_shutdown`` (present only between a
clean close and the next open).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import structlog

from storage.base_log import SegmentedLog
from storage.cleaned_segment import CleanedCopy
from storage.cleaned_segment import FileCopy
from storage.cleaned_segment import finish_interrupted_cleaning
from storage.config import LogConfig
from storage.errors import CorruptRecords
from storage.fsutil import atomic_write
from storage.fsutil import fsync_dir
from storage.producer_state import ProducerStateManager
from storage.recovery import RecoveryEvent
from storage.recovery import load_indexes
from storage.recovery import recover_segment
from storage.segment import FileSegment
from storage.segment import Segment
from storage.segment_ranges import check_ranges

CLEAN_SHUTDOWN = ".clean_shutdown"
PRODUCER_SNAPSHOT = "producer_state.json"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
LOG_START_VERSION = 0

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)

_log = structlog.get_logger(__name__)


def _segment_bases(directory: Path) -> list[int]:
    bases = []
    for path in directory.glob("*.log"):
        if len(path.stem) == 20 and path.stem.isdigit():
            bases.append(int(path.stem))
    return sorted(bases)


def _open_segments(
    directory: Path, config: LogConfig, clean: bool, events: list[RecoveryEvent]
) -> list[FileSegment]:
    interval = config.index_interval_bytes
    segments = [FileSegment(directory, b, interval) for b in _segment_bases(directory)]
    if not segments:
        return [FileSegment(directory, 0, interval)]
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        # Sealed segments were fsynced with their indexes at roll; the active one is
        # only trusted after a clean close.
        if (clean or not last) and load_indexes(segment):
            continue
        # Only the active segment's tail can be torn; damage in a sealed one is stepped
        # over, and never costs the intact batches after it or the segments that follow.
        _recover(segment, events, None if last else segments[i + 1].base_offset)
    return segments


def _recover(segment: FileSegment, events: list[RecoveryEvent], sealed_end: int | None) -> None:
    """`recover_segment`, on a disk with no room for what it writes (the broker must start on
    a full disk, serve reads and refuse writes). The scan had finished: the segment is served
    as scanned, its indexes are rebuilt again at the next start, and a torn tail that could
    not be copied aside is cut without the copy, as Kafka's recovery cuts it."""
    try:
        recover_segment(segment, events, sealed_end)
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
        producers: ProducerStateManager,
        events: list[RecoveryEvent],
    ) -> None:
        super().__init__(config, list[Segment](segments), producers)
        self.directory = directory
        self.name = str(directory)
        self.recovery_events = events
        self._closed = False
        self._log_start = _load_log_start(directory, self._log_start, self.log_end_offset, events)

    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig | None = None) -> SegmentLog:
        """Open (or create) the log in ``directory``, recovering it if needed."""
        config = config or LogConfig()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        for stray in path.glob("*.tmp"):
            stray.unlink()
        for line in finish_interrupted_cleaning(path):
            _log.warning("log_recovery", kind="cleaning", path=str(path), detail=line)
        marker = path / CLEAN_SHUTDOWN
        clean = marker.exists()
        events: list[RecoveryEvent] = []
        segments = _open_segments(path, config, clean, events)
        missing = check_ranges(segments)  # before anything trusts the segments' offsets
        producers = _load_producers(path, segments, events)
        if clean:
            marker.unlink()
            fsync_dir(path)
        log = cls(path, config, segments, producers, events)
        log.missing = missing
        for event in events:
            _log.warning(
                "log_recovery",
                kind=event.kind,
                path=event.path,
                position=event.position,
                detail=event.detail,
            )
        return log

    def _new_segment(self, base_offset: int) -> Segment:
        segment = FileSegment(self.directory, base_offset, self.config.index_interval_bytes)
        fsync_dir(self.directory)
        return segment

    def _after_roll(self) -> None:
        self._save_producers()

    def cleaning_copy(self, segment: Segment) -> CleanedCopy:
        assert isinstance(segment, FileSegment)
        return FileCopy(segment)

    def _save_log_start(self, offset: int) -> None:
        data = f"{LOG_START_VERSION}\n{offset}\n".encode()
        atomic_write(self.directory / LOG_START_CHECKPOINT, data)

    def _save_producers(self) -> None:
        data = self._producers.to_json(self.log_end_offset)
        atomic_write(self.directory / PRODUCER_SNAPSHOT, data)

    def close(self) -> None:
        """Seal, sync, snapshot, then mark the clean shutdown.

        :raises OSError: no room for the indexes or the snapshot (a full disk): the log is
            closed all the same, unmarked, so the next start checks its newest segment.
        """
        if self._closed:
            return
        try:
            self._segments[-1].seal()
            self.flush()
            self._save_producers()
        finally:
            for segment in self._segments:
                segment.close()
            self._closed = True
        atomic_write(self.directory / CLEAN_SHUTDOWN, b"")

    def delete(self) -> None:
        for segment in self._segments:
            segment.close()
        self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)


def _load_producers(
    directory: Path, segments: list[FileSegment], events: list[RecoveryEvent]
) -> ProducerStateManager:
    """Snapshot + a header walk of what was appended after it (or of the whole log)."""
    start, end = segments[0].base_offset, segments[-1].next_offset
    path = directory / PRODUCER_SNAPSHOT
    state, covered = ProducerStateManager(), start
    try:
        state, covered = ProducerStateManager.from_json(path.read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, ValueError, TypeError, KeyError) as exc:
        events.append(RecoveryEvent("snapshot_discarded", str(path), None, repr(exc)))
    if not start <= covered <= end:
        # Recovery cut the log below the snapshot: it describes batches that are gone.
        events.append(RecoveryEvent("snapshot_discarded", str(path), None, f"offset {covered}"))
        state, covered = ProducerStateManager(), start
    for segment in segments:
        if segment.next_offset <= covered:
            continue
        try:
            found = segment.locate(covered) if covered >= segment.base_offset else None
        except CorruptRecords:  # `covered` lies in damage: walk the segment, stepping over it
            found = None
        for _, header in segment.iter_headers(found[0] if found else 0):
            if header.base_offset >= covered:
                state.update(header, header.base_offset)
    return state


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
