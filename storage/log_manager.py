"""All partition logs of the broker, and the topics they belong to."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterator
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait
from dataclasses import replace
from pathlib import Path

import structlog

from storage.base_log import SegmentedLog
from storage.config import LogConfig
from storage.config import check_topic_config_names
from storage.config import check_topic_config_values
from storage.dir_checkpoints import TopicPartition
from storage.dir_checkpoints import mark_clean_shutdown
from storage.dir_checkpoints import read_recovery_points
from storage.dir_checkpoints import save_recovery_points
from storage.dir_checkpoints import take_clean_shutdown
from storage.dir_checkpoints import take_log_markers
from storage.errors import InvalidPartitions
from storage.errors import InvalidTopic
from storage.errors import KafkaStorageError
from storage.errors import TopicAlreadyExists
from storage.errors import UnknownTopicOrPartition
from storage.log import PartitionLog
from storage.memory_log import MemoryLog
from storage.rebuild import rebuild_topics
from storage.recovery import RecoveryStats
from storage.recovery import run_through
from storage.segment import PendingSync
from storage.segment_log import LogClose
from storage.segment_log import SegmentLog
from storage.topic_changes import NewPartitions
from storage.topic_changes import TopicDeletion
from storage.topics import INTERNAL_LOGS
from storage.topics import FileStat
from storage.topics import TopicInfo
from storage.topics import collision_key
from storage.topics import load_topics
from storage.topics import read_partition_metadata
from storage.topics import read_topic_files
from storage.topics import save_topic
from storage.topics import topic_file
from storage.topics import topic_file_stats
from storage.topics import topic_file_versions
from storage.topics import validate_topic_name
from storage.topics import write_partition_metadata

TOPICS_DIR = "__topics"

_log = structlog.get_logger("shoal.storage")


def _keep_aside(path: Path) -> Path:
    """Rename an unreadable file out of the way, for the operator (never deleted)."""
    target = path.with_name(f"{path.name}.corrupt-{time.time_ns() // 1_000_000}")
    try:
        path.rename(target)
    except OSError:
        return path  # replaced when its topic is saved again
    return target


def _name(log: PartitionLog, info: TopicInfo, partition: int) -> None:
    """What a log's own lines (retention's deletions) name it by."""
    if isinstance(log, SegmentedLog):
        log.topic, log.partition = info.name, partition


class LogManager:
    """Owns every partition log.

    Topic metadata lives in ``<data_dir>/__topics/<topic id>.json`` and is the commit point:
    partition directories are made before it is written and removed after it is
    deleted. ``memory=True`` keeps everything in MemoryLogs (tests of other packages).

    Whether the last stop was clean, and each partition's recovery point, are the data dir's
    (`storage.dir_checkpoints`). With ``lazy=True`` the partitions' logs are opened by
    `open_pending` (the broker drives it in slices once it listens) or, before that, by the
    first `log` call for them: a partition is never answered as unknown while it is loading.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None,
        config: LogConfig | None = None,
        *,
        memory: bool = False,
        max_partitions: int | None = None,
        lazy: bool = False,
        threads: int = 1,
        node_dir: str | os.PathLike[str] | None = None,
        owns: Callable[[uuid.UUID, int], bool] | None = None,
        writes_topics: bool = True,
    ) -> None:
        """`threads`: how many file syncs run at once at a start or a stop (`close`).

        One of several broker processes on the data dir (docs/multicore.md) passes `node_dir`
        (its own recovery points, clean shutdown marker and internal logs), `owns` (the
        partitions whose logs it opens; the others are known as topics, never opened) and
        `writes_topics=False` unless it is the controller (it then only reads `__topics`:
        `refresh_topics`)."""
        self._owns = owns
        self.writes_topics = writes_topics
        self.config = config or LogConfig()
        self.threads = threads
        self.max_partitions = max_partitions
        self.memory = memory
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        # Kept as topics come and go, not summed per request: a broker may hold 50,000 topics.
        self._partition_total = 0  # partitions of the topics served
        self._reserved = 0  # partitions being made (`begin_topic`, `begin_partitions`)
        self._collisions: dict[str, str] = {}  # collision key -> the topic served under it
        # The broker's own logs (`internal_log`): maintained like the others, never topics.
        self._internal: dict[str, tuple[PartitionLog, dict[str, str]]] = {}
        # Partitions on disk whose logs are not open yet, and what opening them cost.
        self._pending: dict[TopicPartition, TopicInfo] = {}
        # Of them, those whose opening (a recovery, in slices) is under way.
        self._opening: dict[TopicPartition, Generator[None, None, PartitionLog]] = {}
        self._unopenable: dict[TopicPartition, str] = {}
        self.load_stats = RecoveryStats()
        self.opened_at_start = 0
        self.recovered_at_start = 0  # of them, opened after an unclean shutdown
        self._load_started = time.monotonic()
        self._clean = True
        self._saved_points: dict[TopicPartition, int] = {}
        self._log_clean: set[Path] = set()  # directories with a marker of their own
        self._config_memo: tuple[LogConfig, TopicInfo, LogConfig] | None = None
        self._points_lock = threading.Lock()  # one writer of the checkpoint file at a time
        self._points_taken = 0  # recovery-point snapshots taken (`checkpoint`)
        self._points_written = 0  # the newest of them on disk
        self.node_dir: Path | None = None
        if memory:
            self.data_dir = None
            return
        if data_dir is None:
            raise ValueError("data_dir is required unless memory=True")
        self.data_dir = Path(data_dir)
        self.node_dir = node = Path(node_dir) if node_dir is not None else self.data_dir
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        node.mkdir(parents=True, exist_ok=True)
        self._clean = take_clean_shutdown(node)
        self._saved_points = read_recovery_points(node)
        if writes_topics:
            self._finish_deletes()
        # What a follower checks its topic files against (`recheck_topic_files`): taken before
        # they are read, so a change made meanwhile shows at the first check.
        self._checked_stamp = self._topics_stamp()
        self._file_stats: dict[str, FileStat] = (
            {} if writes_topics else topic_file_stats(self.meta_dir)
        )
        self._load_topics()
        # The version (inode) of each topic file read: a follower reads only those that moved.
        self._topic_files: dict[str, int] = topic_file_versions(self.meta_dir)
        self._topics_seen = self._topics_stamp()
        for info in self.topics():
            for partition in range(info.partitions):
                if self.owns(info.topic_id, partition):
                    self._pending[(info.name, partition)] = info
        if not self._saved_points:  # a data dir of an older version (or its file lost)
            directories = [self.partition_dir(*key) for key in self._pending]
            directories += [node / f"{name}-0" for name in INTERNAL_LOGS]
            self._log_clean = take_log_markers(directories, threads)
        if not lazy:
            for _ in self.open_pending():
                pass

    def _load_topics(self) -> None:
        """Topic files, then topics rebuilt from partition directories: those whose file is
        missing or unreadable (set aside as `<file>.corrupt-<ms>`, one log line each)."""
        assert self.data_dir is not None
        topics, unreadable = load_topics(self.meta_dir)
        for info in topics:
            self._register(info)
        kept = {f.path: _keep_aside(f.path) for f in unreadable}
        said = {
            f.topic_id: f"unreadable ({f.error}); kept as {kept[f.path].name}"
            for f in unreadable
            if f.topic_id is not None
        }
        rebuilt = rebuild_topics(self.data_dir, self.topics(), said)
        for info in rebuilt:
            try:
                if self.writes_topics:  # one writer of __topics
                    self._save(info)
            except OSError as e:  # a full disk: served all the same, rebuilt again next start
                _log.warning("rebuilt topic's metadata file not written", topic=info.name,
                             error=e.strerror)  # fmt: skip
            self._register(info)
        ids = {info.topic_id for info in rebuilt}
        for f in unreadable:
            if f.topic_id not in ids:
                _log.error("topic metadata file unreadable, and no partition directory names "
                           "its topic id; kept aside", path=str(kept[f.path]),
                           error=f.error)  # fmt: skip

    def owns(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether this process opens (leads) the partition: always, but with several
        processes on the data dir."""
        return self._owns is None or self._owns(topic_id, partition)

    def led_elsewhere(self, topic: str, partition: int) -> bool:
        """The partition exists and another process leads it (its log is never opened here)."""
        info = self._topics.get(topic)
        return (
            self._owns is not None
            and info is not None
            and 0 <= partition < info.partitions
            and not self._owns(info.topic_id, partition)
        )

    def _topics_stamp(self) -> int:
        """Changes when a topic file is made, replaced or removed (each is a rename or unlink
        in `__topics`, which moves the directory's modification time)."""
        try:
            return self.meta_dir.stat().st_mtime_ns
        except OSError:
            return -1

    def refresh_topics(self) -> bool:
        """Follow the controller's topic files (a process that does not write them): serve
        new topics and partitions (this process's own opened on use), stop serving deleted
        ones (their logs closed; the controller removes their directories) and take changed
        configs. Cheap when nothing changed (one stat); else one listing of the directory and
        the files made or replaced since read (reading every file, 30-40 us each, held the
        loop ~90 ms per auto-created topic once 2,000 were known). True if something did."""
        stamp = self._topics_stamp()
        if self.data_dir is None or self.writes_topics or stamp == self._topics_seen:
            return False
        self._topics_seen = stamp
        try:
            files = topic_file_versions(self.meta_dir)
        except OSError:
            files = {}
        read = self._topic_files
        moved = sorted(name for name, version in files.items() if read.get(name) != version)
        self._topic_files = files
        topics, unreadable = read_topic_files(self.meta_dir / name for name in moved)
        # As before: a topic whose file is gone, or no longer reads, is no longer served.
        stale = {_file_topic_id(name) for name in read.keys() - files.keys()}
        stale |= {f.topic_id for f in unreadable}
        for gone in [info for info in self._topics.values() if info.topic_id in stale]:
            for closing in self.begin_delete(gone.name).logs.values():
                if isinstance(closing, SegmentLog):
                    closing.drop()  # its directory is gone (renamed by the controller)
                else:
                    closing.close()
        for info in topics:
            if not self._follow(info):
                self._topic_files.pop(topic_file(self.meta_dir, info).name, None)  # read again
        return True

    def topic_files_unchecked(self) -> int | None:
        """The topic directory's stamp if it moved since the last `recheck_topic_files` (a
        follower's), else None: one stat."""
        if self.data_dir is None or self.writes_topics:
            return None
        stamp = self._topics_stamp()
        return None if stamp == self._checked_stamp else stamp

    def recheck_topic_files(self, stamp: int, stats: Mapping[str, FileStat]) -> None:
        """Take a stat of every topic file (`topic_file_stats`, made in a thread after the
        directory showed `stamp`): a file whose stat moved since the last check is read again at
        the next `refresh_topics`, even where its inode is one already read (the inode scan of
        `refresh_topics` cannot see a file replaced twice with its inode reused)."""
        before = self._file_stats
        for name, stat in stats.items():
            if before.get(name) != stat:
                self._topic_files.pop(name, None)
                self._topics_seen = -2  # the next refresh lists the directory
        self._file_stats = dict(stats)
        self._checked_stamp = stamp

    def _follow(self, info: TopicInfo) -> bool:
        """Serve a topic as the controller's file now says (`refresh_topics`); False: not
        yet."""
        known = self._by_id.get(info.topic_id)
        if known is None and info.name in self._topics:
            return False  # a name reused before its old id's file went: next time
        first = known.partitions if known is not None else 0
        self._register(info)
        for partition in range(first, info.partitions):
            if self.owns(info.topic_id, partition):
                self._pending[(info.name, partition)] = info
        if known is not None and known.configs != info.configs:
            config = self.config.with_overrides(info.configs)
            for partition in range(info.partitions):
                plog = self._logs.get((info.name, partition))
                if isinstance(plog, SegmentedLog):
                    plog.config = config
        return True

    @property
    def meta_dir(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / TOPICS_DIR

    def partition_dir(self, name: str, partition: int) -> Path:
        assert self.data_dir is not None
        return self.data_dir / f"{name}-{partition}"

    def _register(self, info: TopicInfo) -> None:
        known = self._topics.get(info.name)
        self._partition_total += info.partitions - (known.partitions if known else 0)
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info
        self._collisions[collision_key(info.name)] = info.name

    def _unregister(self, info: TopicInfo) -> None:
        del self._topics[info.name], self._by_id[info.topic_id]
        del self._collisions[collision_key(info.name)]
        self._partition_total -= info.partitions

    # --- opening the logs at start ------------------------------------------------------

    @property
    def loading(self) -> bool:
        """Some partitions' logs are not open yet."""
        return bool(self._pending)

    def is_pending(self, topic: str, partition: int) -> bool:
        """The partition's log is on disk and not open yet (`log` opens it)."""
        key = (topic, partition)
        return key in self._pending or key in self._unopenable

    @property
    def fully_loaded(self) -> bool:
        """Every partition's log was opened (none is pending, none failed to open)."""
        return not self._pending and not self._unopenable

    def open_pending(self, slice_s: float = 0.02) -> Iterator[None]:
        """Open the logs not opened yet, yielding about every `slice_s` seconds (drive it from
        the event loop between awaits), within a log's recovery too; says in one line what it
        took once none is left. A log that cannot be opened (a read fails) is said once and
        left out: asking for it again (`log`) tries again."""
        started = time.monotonic()
        while self._pending:
            # One a request asked for first (its recovery under way), then in order.
            key = next(iter(self._opening), None) or next(iter(self._pending))
            try:
                log = self._open_pending(key, started + slice_s)
            except OSError as e:
                self._pending.pop(key, None)
                self._unopenable[key] = e.strerror or str(e)
                _log.error("partition log not opened; tried again when asked for",
                           topic=key[0], partition=key[1], error=self._unopenable[key])  # fmt: skip
                log = None
            if log is None or time.monotonic() - started >= slice_s:
                yield
                started = time.monotonic()
        self._say_loaded()

    def _open_pending(self, key: TopicPartition, until: float) -> PartitionLog | None:
        """Open `key`'s log, or go on opening it, until the monotonic time `until` at most
        (about: a slice of its recovery runs to its end); the log once open, else None.

        :raises OSError: it cannot be opened (tried from the start next time).
        """
        steps = self._opening.get(key)
        if steps is None:
            info = self._pending.get(key) or self._topics[key[0]]
            steps = self._opening[key] = self._opening_log(info, key[1], starting=True)
        try:
            while True:
                next(steps)
                if time.monotonic() >= until:
                    return None
        except StopIteration as done:
            self._opening.pop(key, None)
            log: PartitionLog = done.value
        except BaseException:
            self._opening.pop(key, None)
            raise
        self._logs[key] = log
        self._pending.pop(key, None)
        self._unopenable.pop(key, None)
        return log

    def _say_loaded(self) -> None:
        if self._pending or self.data_dir is None or self._load_started < 0:
            return
        seconds = round(time.monotonic() - self._load_started, 3)
        self._load_started = -1.0  # said once
        stats = self.load_stats
        fields = {
            "partitions": self.opened_at_start, "seconds": seconds,
            "recovered": self.recovered_at_start, "segments_scanned": stats.segments_scanned,
            "bytes_scanned": stats.bytes_scanned, "indexes_rebuilt": stats.indexes_rebuilt,
            "truncated": stats.truncated, "not_opened": len(self._unopenable),
        }  # fmt: skip
        if not self.recovered_at_start and not stats.indexes_rebuilt:
            _log.info("logs loaded", clean_shutdown=self._clean, **fields)
        else:
            _log.warning("logs loaded; those not closed cleanly were checked past their "
                         "recovery points", clean_shutdown=self._clean, **fields)  # fmt: skip

    def _opened(self, log: PartitionLog, key: TopicPartition) -> None:
        """Account for a log opened at start (of a partition that was on disk)."""
        if not isinstance(log, SegmentLog):
            return
        self.opened_at_start += 1
        self.load_stats.add(log.recovery_stats)
        if not log.clean:
            self.recovered_at_start += 1
        saved = self._saved_points.get(key)
        if saved is not None and log.recovery_point < saved:
            self._saved_points[key] = log.recovery_point  # recovery cut below it

    def open_log(
        self, info: TopicInfo, partition: int, new: bool = False, *, starting: bool = False
    ) -> PartitionLog:
        """A partition's log, opened (and recovered) from its directory; a `new` one's
        `partition.metadata` is written later (`NewPartitions.record`). `starting`: at the
        broker's start, where a full disk must not stop it, and what opening cost is counted."""
        return run_through(self._opening_log(info, partition, new, starting=starting))

    def _opening_log(
        self, info: TopicInfo, partition: int, new: bool = False, *, starting: bool = False
    ) -> Generator[None, None, PartitionLog]:
        """`open_log`, yielding between slices of a recovery."""
        memo = self._config_memo  # a topic's partitions open one after another at a start
        if memo is not None and memo[0] is self.config and memo[1] is info:
            config = memo[2]
        else:
            config = self.config.with_overrides(info.configs)
            self._config_memo = (self.config, info, config)
        log: PartitionLog
        key = (info.name, partition)
        if self.data_dir is None:
            log = MemoryLog(config)
            _name(log, info, partition)
        else:
            directory = self.partition_dir(info.name, partition)
            # A new partition's directory is new (`set_aside`): nothing in it to check.
            clean = self._clean or not starting or directory in self._log_clean
            log = yield from SegmentLog.opening(
                directory, config, clean=clean, recovery_point=self._saved_points.get(key)
            )
            _name(log, info, partition)
            if starting:
                self._opened(log, key)
            if new:
                return log
            claimed = read_partition_metadata(directory)
            if claimed is None:  # new, or made before partition.metadata existed
                try:
                    write_partition_metadata(directory, info.topic_id)
                except OSError:
                    if not starting:  # a new partition must have it: the create fails
                        raise
                    # A full disk at start: the topic file names the id; written next start.
            elif claimed != info.topic_id:
                _log.error(
                    "partition directory names another topic id; serving it as the topic file says",
                    directory=str(directory), topic_id=str(info.topic_id), claimed=str(claimed),
                )  # fmt: skip
        return log

    def _finish_deletes(self) -> None:
        """Complete DeleteTopics that a crash interrupted (their directories were renamed)."""
        assert self.data_dir is not None
        for directory in sorted(self.data_dir.glob("*-delete")):
            topic_id = directory.name.removesuffix("-delete").rpartition(".")[2]
            with contextlib.suppress(ValueError):
                (self.meta_dir / f"{uuid.UUID(topic_id)}.json").unlink(missing_ok=True)
            shutil.rmtree(directory, ignore_errors=True)
            _log.info("finished deleting a topic's partition", directory=str(directory))

    def _save(self, info: TopicInfo) -> None:
        if self.data_dir is not None:
            save_topic(self.meta_dir, info)

    save = _save

    @staticmethod
    def write_metadata(directory: Path, topic_id: uuid.UUID) -> None:
        write_partition_metadata(directory, topic_id)

    # --- topics -----------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        return self.begin_topic(name, partitions, configs).run_all()

    def begin_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> NewPartitions:
        """A new topic, checked and its room taken, to be made in steps (`topic_changes`).

        :raises StorageError: the name, the count or a config is refused, or there is no room.
        """
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        clash = self._collisions.get(collision_key(name))
        if clash is not None:
            raise InvalidTopic(f"topic {name!r} collides with existing topic {clash!r}")
        if partitions < 1:
            raise InvalidPartitions(f"number of partitions must be at least 1, got {partitions}")
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs or {}))
        check_topic_config_names(info.configs)  # refuse bad names and values before anything
        check_topic_config_values(info.configs)
        self.config.with_overrides(info.configs)  # exists
        return self._reserve(info, 0)

    def partition_count(self) -> int:
        """Partitions served, and being made."""
        return self._partition_total + self._reserved

    def _reserve(self, info: TopicInfo, first: int) -> NewPartitions:
        added = info.partitions - first
        total = self.partition_count() + added
        if self.max_partitions is not None and total > self.max_partitions:
            raise InvalidPartitions(
                f"{added} more partitions would make {total}, over max.broker.partitions "
                f"({self.max_partitions})"
            )
        self._reserved += added
        return NewPartitions(self, info, first)

    def release(self, change: NewPartitions) -> None:
        """`change` is finished or abandoned: its room is no longer reserved."""
        self._reserved -= change.count

    def finish_new(self, change: NewPartitions) -> None:
        """Serve `change`'s partitions (`NewPartitions.finish`)."""
        for partition, log in change.logs.items():
            self._logs[(change.info.name, partition)] = log
        self.release(change)
        self._register(change.info)

    def delete_topic(self, name: str) -> None:
        """Removes a topic and its data. Crash-safe: the partition directories are renamed
        `<dir>.<id>-delete` first, so a restart finishes the deletion instead of rebuilding
        the topic from them."""
        self.begin_delete(name).run_all()

    def begin_delete(self, name: str) -> TopicDeletion:
        """Take a topic out of service, to be deleted in steps (`topic_changes`).

        :raises UnknownTopicOrPartition: no such topic.
        """
        info = self._require(name)
        logs: dict[int, PartitionLog] = {}
        for partition in range(info.partitions):
            key = (name, partition)
            self._pending.pop(key, None)  # never opened: its directory goes all the same
            if (steps := self._opening.pop(key, None)) is not None:
                steps.close()  # a recovery under way: abandoned
            self._unopenable.pop(key, None)
            self._saved_points.pop(key, None)
            if (log := self._logs.pop(key, None)) is not None:
                logs[partition] = log
        self._unregister(info)
        return TopicDeletion(self, info, logs)

    def restore(self, deletion: TopicDeletion) -> None:
        """Serve a topic whose deletion failed again (a log never opened is opened on use)."""
        info = deletion.info
        for partition in range(info.partitions):
            log = deletion.logs.get(partition)
            if log is not None:
                self._logs[(info.name, partition)] = log
            elif self.data_dir is not None:
                self._pending[(info.name, partition)] = info
        self._register(info)

    def create_partitions(self, name: str, new_total: int) -> TopicInfo:
        return self.begin_partitions(name, new_total).run_all()

    def begin_partitions(self, name: str, new_total: int) -> NewPartitions:
        """A topic's new partitions, checked and their room taken, to be made in steps.

        :raises StorageError: no such topic, no partition added, or no room.
        """
        info = self._require(name)
        if new_total <= info.partitions:
            raise InvalidPartitions(
                f"topic {name!r} has {info.partitions} partitions; {new_total} would not add any"
            )
        return self._reserve(replace(info, partitions=new_total), info.partitions)

    def set_aside(self, name: str, partition: int) -> Path:
        """A new partition's directory (returned) already exists (no topic claimed it at
        start): keep it, renamed out of the way, and say so. Only DeleteTopics removes data."""
        directory = self.partition_dir(name, partition)
        if directory.exists():
            target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}-orphaned")
            directory.rename(target)
            _log.error("an existing directory was in the way of a new partition; kept as",
                       directory=str(target))  # fmt: skip
        return directory

    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartition(f"unknown topic {name!r}")
        return info

    def topics(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log (opened now if it was not yet: see `open_pending`).

        :raises storage.errors.KafkaStorageError: it is on disk but cannot be opened.
        """
        log = self._logs.get((topic, partition))
        if log is None and (self._pending or self._unopenable):
            key = (topic, partition)
            if key in self._pending or key in self._unopenable:
                log = self._open_now(key, math.inf)
        return log

    def open_slice(self, topic: str, partition: int, slice_s: float = 0.02) -> bool:
        """Go on opening a partition's log not open yet for about `slice_s` seconds (a request
        awaits a long recovery a slice at a time: `broker.log_loading.open_first`); True once
        it is open, or was not pending.

        :raises storage.errors.KafkaStorageError: it is on disk but cannot be opened.
        """
        key = (topic, partition)
        if key not in self._pending and key not in self._unopenable:
            return True
        return self._open_now(key, time.monotonic() + slice_s) is not None

    def _open_now(self, key: TopicPartition, until: float) -> PartitionLog | None:
        try:
            log = self._open_pending(key, until)
        except OSError as e:
            self._unopenable[key] = e.strerror or str(e)
            raise KafkaStorageError(f"{key[0]}-{key[1]} not opened: {e}") from e
        if log is not None:
            self._say_loaded()
        return log

    # --- internal logs ----------------------------------------------------------------

    def internal_log(self, name: str, configs: Mapping[str, str]) -> PartitionLog:
        """The broker's own one-partition log `name` (one of `INTERNAL_LOGS`), opened (and
        recovered) on first use in `<data dir>/<name>-0`, under `configs` over the broker's
        defaults. Flushed, cleaned and closed with the topics' logs; not a topic: Metadata,
        CreateTopics and DeleteTopics never see it, and no topic may take its name."""
        if name not in INTERNAL_LOGS:
            raise ValueError(f"{name!r} is not an internal log")
        known = self._internal.get(name)
        if known is not None:
            return known[0]
        config = self.config.with_overrides(configs)
        log: PartitionLog
        if self.data_dir is None:
            log = MemoryLog(config)
        else:
            assert self.node_dir is not None
            directory = self.node_dir / f"{name}-0"
            log = SegmentLog.open(
                directory, config, clean=self._clean or directory in self._log_clean,
                recovery_point=self._saved_points.get((name, 0)),
            )  # fmt: skip
            self._opened(log, (name, 0))
        if isinstance(log, SegmentedLog):
            log.topic, log.partition = name, 0
        self._internal[name] = (log, dict(configs))
        return log

    def _all_logs(self) -> list[PartitionLog]:
        return [*self._logs.values(), *(log for log, _ in self._internal.values())]

    # --- maintenance ------------------------------------------------------------------

    def partition_logs(self) -> list[tuple[tuple[str, int], PartitionLog]]:
        """Every open partition log with its (topic, partition), the internal ones last."""
        internal = [((name, 0), log) for name, (log, _) in self._internal.items()]
        return [*self._logs.items(), *internal]

    def damaged_records(self) -> int:
        """Offsets lost to damaged batches found so far, over every partition."""
        return sum(
            d.records
            for log in self._all_logs()
            if isinstance(log, SegmentedLog)
            for d in log.damaged_ranges()
        )

    def max_producer_id(self) -> int:
        """The highest producer id any partition recorded (-1: none): where the producer id
        allocator must start above when its own file is lost. Known from recovery already,
        once every log is open (`fully_loaded`)."""
        return max(
            (log.max_producer_id for log in self._all_logs() if isinstance(log, SegmentedLog)),
            default=-1,
        )

    def missing_records(self) -> int:
        """Offsets found missing between segments at open (lost or cut segment files)."""
        return sum(
            log.missing_records() for log in self._all_logs() if isinstance(log, SegmentedLog)
        )

    def flush_all(self) -> None:
        for log in self._all_logs():
            log.flush()

    def start_flush(self) -> list[PendingSync]:
        """Every dirty segment's fsync, its dirty flag already cleared: run them with
        `sync_all` in a thread, so a slow disk never holds the event loop."""
        return [p for log in self._all_logs() for p in log.start_flush()]

    def apply_retention(
        self, now_ms: int, min_retained_offsets: Mapping[tuple[str, int], int] | None = None
    ) -> int:
        """Retention on every partition; ``min_retained_offsets`` protects share state."""
        keep = min_retained_offsets or {}
        return sum(log.apply_retention(now_ms, keep.get(tp)) for tp, log in self.partition_logs())

    # --- recovery points and closing ---------------------------------------------------

    def recovery_points(self) -> dict[TopicPartition, int]:
        """Each partition's recovery point: its log's, or as read at start if not open yet."""
        points = {
            k: v
            for k, v in self._saved_points.items()
            if k in self._pending or k in self._unopenable
        }
        for key, log in self.partition_logs():
            if isinstance(log, SegmentedLog) and not isinstance(log, MemoryLog):
                points[key] = log.recovery_point
        return points

    def save_recovery_points(self, points: Mapping[TopicPartition, int]) -> None:
        """Write `points` (from `recovery_points`, on the event loop) to the data dir's
        checkpoint file; any thread.

        :raises OSError: not written; the file keeps older, lower points.
        """
        self.checkpoint(points)()

    def checkpoint(self, points: Mapping[TopicPartition, int] | None = None) -> Callable[[], None]:
        """The recovery points as they are now (or `points`, taken now), and the job that
        writes them (any thread). Jobs write in the order their points were taken: one whose
        points are older than some already written does nothing, and two never write the file
        at once (the checkpoint duty's save in its thread, and the stop's).

        The job :raises OSError: not written; the file keeps older, lower points.
        """
        self._points_taken += 1
        taken, points = self._points_taken, self.recovery_points() if points is None else points

        def save() -> None:
            if self.data_dir is None:
                return
            with self._points_lock:
                if taken < self._points_written:
                    return  # newer points are on disk already
                assert self.node_dir is not None
                save_recovery_points(self.node_dir, points)
                self._points_written = taken

        return save

    def close(self, timeout_s: float | None = None, threads: int | None = None) -> bool:
        """Close every open log, their syncs and file writes in `threads` threads at once, for
        at most `timeout_s` seconds; then save every recovery point, and mark the data dir
        clean if every log was closed (and none left unopened after an unclean start: those
        were never checked). True if marked clean.

        A log that cannot be closed cleanly (no room for its indexes, a failed sync) is closed
        all the same; those, and those not closed in time, are checked past their recovery
        points at the next start. Said in one line.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for steps in self._opening.values():
            steps.close()  # recoveries under way: checked again at the next start
        self._opening.clear()
        failed: list[tuple[str, OSError]] = []
        workers = max(1, threads or self.threads)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="shoal-close")
        running: dict[Future[None], tuple[SegmentLog, LogClose]] = {}
        for log in self._all_logs():
            if not isinstance(log, SegmentLog):
                log.close()
                continue
            try:
                closing = log.start_close()
            except OSError as e:
                failed.append((log.name, e))
                log.finish_close(None)
                continue
            running[pool.submit(closing.run)] = (log, closing)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        done, late = wait(running, timeout=remaining)
        pool.shutdown(wait=False, cancel_futures=True)  # those under way finish on their own
        for future in done:
            log, closing = running[future]
            error = future.exception()
            if isinstance(error, OSError):
                failed.append((log.name, error))
            elif error is not None:
                raise error
            log.finish_close(None if error else closing)
        return self._closed(failed, len(late))

    def _closed(self, failed: list[tuple[str, OSError]], late: int) -> bool:
        if failed:
            name, error = failed[0]
            _log.error(
                "logs not closed cleanly; checked past their recovery points at the next start",
                logs=len(failed), first=name, error=error.strerror,
            )  # fmt: skip
        if late:
            _log.warning("logs not closed within shutdown.timeout.ms; checked past their "
                         "recovery points at the next start", logs=late)  # fmt: skip
        if self.node_dir is None:
            return False
        try:
            self.checkpoint()()
        except OSError as e:
            _log.error("recovery points not saved; the older ones are used at the next start",
                       error=e.strerror)  # fmt: skip
        if failed or late or self._unopenable or (self._pending and not self._clean):
            return False
        try:
            mark_clean_shutdown(self.node_dir)
        except OSError as e:
            _log.error("clean shutdown not marked; logs are checked past their recovery points "
                       "at the next start", error=e.strerror)  # fmt: skip
            return False
        return True

    def reconfigure(self, config: LogConfig) -> None:
        """New broker-level defaults (dynamic broker configs): every log follows them at once,
        under its topic's own configs, as Kafka's DynamicLogConfig."""
        by_topic = {name: config.with_overrides(t.configs) for name, t in self._topics.items()}
        self.config = config
        for (name, _), log in self._logs.items():
            if isinstance(log, SegmentedLog):
                log.config = by_topic[name]
        for log, configs in self._internal.values():
            if isinstance(log, SegmentedLog):
                log.config = config.with_overrides(configs)

    def alter_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        """Set (None: remove) topic configs; the partitions' logs use the new values at once.
        The broker does it in steps, the file written off its loop (`broker.topic_admin`).

        :raises UnknownTopicOrPartition: no such topic.
        :raises InvalidConfig: a value does not parse or is out of range; nothing changes then.
        """
        altered = self.plan_topic_configs(name, changes)
        self._save(altered)
        self.apply_topic_configs(altered, range(altered.partitions))
        return altered

    def plan_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        """The topic with `changes` made to its configs, checked; nothing changes yet (then
        `save` it and `apply_topic_configs`).

        :raises UnknownTopicOrPartition: no such topic.
        :raises InvalidConfig: a value does not parse or is out of range.
        """
        info = self._require(name)
        check_topic_config_names(changes)
        check_topic_config_values(changes)
        configs = {k: v for k, v in info.configs.items() if k not in changes}
        configs.update({k: v for k, v in changes.items() if v is not None})
        self.config.with_overrides(configs)
        return replace(info, configs=configs)

    def apply_topic_configs(self, altered: TopicInfo, partitions: range) -> None:
        """Put a planned change in force: the topic registered with it, and the logs of
        `partitions` using its values (a caller with many partitions does them in slices,
        the topic registered on each call)."""
        self._register(altered)
        config = self.config.with_overrides(altered.configs)
        name = altered.name
        for partition in partitions:
            log = self._logs.get((name, partition))
            if isinstance(log, SegmentedLog):
                log.config = config


def _file_topic_id(name: str) -> uuid.UUID | None:
    """The topic id a topic file's name carries (`<topic id>.json`)."""
    try:
        return uuid.UUID(name.removesuffix(".json"))
    except ValueError:
        return None
