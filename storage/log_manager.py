"""All partition logs of the broker, and the topics they belong to."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import structlog

from storage.base_log import SegmentedLog
from storage.config import LogConfig
from storage.config import check_topic_config_names
from storage.config import check_topic_config_values
from storage.errors import InvalidPartitions
from storage.errors import InvalidTopic
from storage.errors import TopicAlreadyExists
from storage.errors import UnknownTopicOrPartition
from storage.log import PartitionLog
from storage.memory_log import MemoryLog
from storage.rebuild import rebuild_topics
from storage.segment import PendingSync
from storage.segment_log import SegmentLog
from storage.topic_changes import NewPartitions
from storage.topic_changes import TopicDeletion
from storage.topics import INTERNAL_LOGS
from storage.topics import TopicInfo
from storage.topics import collision_key
from storage.topics import load_topics
from storage.topics import read_partition_metadata
from storage.topics import save_topic
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
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None,
        config: LogConfig | None = None,
        *,
        memory: bool = False,
        max_partitions: int | None = None,
    ) -> None:
        self.config = config or LogConfig()
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
        if memory:
            self.data_dir = None
            return
        if data_dir is None:
            raise ValueError("data_dir is required unless memory=True")
        self.data_dir = Path(data_dir)
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        self._finish_deletes()
        self._load_topics()
        for info in self.topics():
            for partition in range(info.partitions):
                self._open_log(info, partition, starting=True)

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

    def _open_log(self, info: TopicInfo, partition: int, *, starting: bool = False) -> None:
        self._logs[(info.name, partition)] = self.open_log(info, partition, starting=starting)

    def open_log(
        self, info: TopicInfo, partition: int, new: bool = False, *, starting: bool = False
    ) -> PartitionLog:
        """A partition's log, opened (and recovered) from its directory; a `new` one's
        `partition.metadata` is written later (`NewPartitions.record`). `starting`: at the
        broker's start, where a full disk must not stop it."""
        config = self.config.with_overrides(info.configs)
        log: PartitionLog
        if self.data_dir is None:
            log = MemoryLog(config)
            _name(log, info, partition)
        else:
            directory = self.partition_dir(info.name, partition)
            log = SegmentLog.open(directory, config)
            _name(log, info, partition)
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
        logs = {p: self._logs.pop((name, p)) for p in range(info.partitions)}
        self._unregister(info)
        return TopicDeletion(self, info, logs)

    def restore(self, deletion: TopicDeletion) -> None:
        """Serve a topic whose deletion failed again."""
        for partition, log in deletion.logs.items():
            self._logs[(deletion.info.name, partition)] = log
        self._register(deletion.info)

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
        return self._logs.get((topic, partition))

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
            log = SegmentLog.open(self.data_dir / f"{name}-0", config)
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
        allocator must start above when its own file is lost. Known from recovery already."""
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

    def close(self) -> None:
        """Close every log, even when some cannot be closed cleanly (no room on the disk for
        their indexes): those are checked at the next start, and said in one line."""
        failed: list[tuple[str, OSError]] = []
        for log in self._all_logs():
            try:
                log.close()
            except OSError as e:
                failed.append((getattr(log, "name", "?"), e))
        if failed:
            name, error = failed[0]
            _log.error("logs not closed cleanly; their newest segments are checked at the next "
                       "start", logs=len(failed), first=name, error=error.strerror)  # fmt: skip

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

        :raises UnknownTopicOrPartition: no such topic.
        :raises InvalidConfig: a value does not parse or is out of range; nothing changes then.
        """
        info = self._require(name)
        check_topic_config_names(changes)
        check_topic_config_values(changes)
        configs = {k: v for k, v in info.configs.items() if k not in changes}
        configs.update({k: v for k, v in changes.items() if v is not None})
        config = self.config.with_overrides(configs)
        altered = replace(info, configs=configs)
        self._save(altered)
        self._register(altered)
        for partition in range(info.partitions):
            log = self._logs.get((name, partition))
            if isinstance(log, SegmentedLog):
                log.config = config
        return altered
