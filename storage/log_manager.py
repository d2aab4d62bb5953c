"""All partition logs of the broker, and the topics they belong to."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from storage.config import LogConfig
from storage.errors import InvalidPartitions
from storage.errors import InvalidTopic
from storage.errors import TopicAlreadyExists
from storage.errors import UnknownTopicOrPartition
from storage.log import PartitionLog
from storage.memory_log import MemoryLog
from storage.segment import PendingSync
from storage.segment_log import SegmentLog
from storage.topics import TopicInfo
from storage.topics import collision_key
from storage.topics import load_topics
from storage.topics import save_topic
from storage.topics import topic_file
from storage.topics import validate_topic_name

TOPICS_DIR = "__topics"


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
    ) -> None:
        self.config = config or LogConfig()
        self.memory = memory
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        if memory:
            self.data_dir = None
            return
        if data_dir is None:
            raise ValueError("data_dir is required unless memory=True")
        self.data_dir = Path(data_dir)
        self._meta_dir.mkdir(parents=True, exist_ok=True)
        for info in load_topics(self._meta_dir):
            self._register(info)
            for partition in range(info.partitions):
                self._open_log(info, partition)

    @property
    def _meta_dir(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / TOPICS_DIR

    def _partition_dir(self, name: str, partition: int) -> Path:
        assert self.data_dir is not None
        return self.data_dir / f"{name}-{partition}"

    def _register(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    def _open_log(self, info: TopicInfo, partition: int) -> None:
        config = self.config.with_overrides(info.configs)
        log: PartitionLog
        if self.data_dir is None:
            log = MemoryLog(config)
        else:
            log = SegmentLog.open(self._partition_dir(info.name, partition), config)
        self._logs[(info.name, partition)] = log

    def _save(self, info: TopicInfo) -> None:
        if self.data_dir is not None:
            save_topic(self._meta_dir, info)

    # --- topics -----------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        key = collision_key(name)
        clash = next((t for t in self._topics if collision_key(t) == key), None)
        if clash is not None:
            raise InvalidTopic(f"topic {name!r} collides with existing topic {clash!r}")
        if partitions < 1:
            raise InvalidPartitions(f"number of partitions must be at least 1, got {partitions}")
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs or {}))
        self.config.with_overrides(info.configs)  # refuse bad values before anything exists
        for partition in range(partitions):
            self._remove_dir(name, partition)  # leftovers of an interrupted delete
            self._open_log(info, partition)
        self._save(info)
        self._register(info)
        return info

    def delete_topic(self, name: str) -> None:
        info = self._require(name)
        if self.data_dir is not None:
            topic_file(self._meta_dir, info).unlink()
        for partition in range(info.partitions):
            self._logs.pop((name, partition)).delete()
        del self._topics[name], self._by_id[info.topic_id]

    def create_partitions(self, name: str, new_total: int) -> TopicInfo:
        info = self._require(name)
        if new_total <= info.partitions:
            raise InvalidPartitions(
                f"topic {name!r} has {info.partitions} partitions; {new_total} would not add any"
            )
        grown = replace(info, partitions=new_total)
        for partition in range(info.partitions, new_total):
            self._remove_dir(name, partition)
            self._open_log(grown, partition)
        self._save(grown)
        self._register(grown)
        return grown

    def _remove_dir(self, name: str, partition: int) -> None:
        if self.data_dir is not None:
            shutil.rmtree(self._partition_dir(name, partition), ignore_errors=True)

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

    # --- maintenance ------------------------------------------------------------------

    def flush_all(self) -> None:
        for log in self._logs.values():
            log.flush()

    def start_flush(self) -> list[PendingSync]:
        """Every dirty segment's fsync, its dirty flag already cleared: run them with
        `sync_all` in a thread, so a slow disk never holds the event loop."""
        return [p for log in self._logs.values() for p in log.start_flush()]

    def apply_retention(
        self, now_ms: int, min_retained_offsets: Mapping[tuple[str, int], int] | None = None
    ) -> int:
        """Retention on every partition; ``min_retained_offsets`` protects share state."""
        keep = min_retained_offsets or {}
        return sum(log.apply_retention(now_ms, keep.get(tp)) for tp, log in self._logs.items())

    def close(self) -> None:
        for log in self._logs.values():
            log.close()

    def alter_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        """Set (None: remove) topic configs; the partitions' logs use the new values at once.

        :raises UnknownTopicOrPartition: no such topic.
        :raises InvalidConfig: a value does not parse or is out of range; nothing changes then.
        """
        from storage.base_log import SegmentedLog

        info = self._require(name)
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
