"""In-memory PartitionLog with the same behaviour as SegmentLog, and topics of them, for tests."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from collections.abc import Sequence

from storage.base_log import SegmentedLog
from storage.cleaned_segment import CleanedCopy
from storage.cleaned_segment import MemoryCopy
from storage.config import LogConfig
from storage.log import PartitionLog
from storage.producer_state import ProducerStateManager
from storage.segment import MemorySegment
from storage.segment import Segment
from storage.topics import TopicInfo


class MemoryLog(SegmentedLog):
    def __init__(self, config: LogConfig | None = None) -> None:
        config = config or LogConfig()
        segment = MemorySegment(0, config.index_interval_bytes)
        super().__init__(config, [segment], ProducerStateManager())

    def _new_segment(self, base_offset: int) -> Segment:
        return MemorySegment(base_offset, self.config.index_interval_bytes)

    def cleaning_copy(self, segment: Segment) -> CleanedCopy:
        return MemoryCopy(segment.base_offset, self.config.index_interval_bytes)

    def close(self) -> None:
        self.flush()

    def delete(self) -> None:
        self._segments[:] = [self._new_segment(self.log_end_offset)]
        self._bases[:] = [self.log_end_offset]
        self._log_start = self.log_end_offset


class MemoryLogs:
    """Topics by name and id over logs held in memory: what LogManager offers to the share
    layer (topics, topic_by_id, log), with no directory, metadata files or limits."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicInfo] = {}
        self._logs: dict[str, list[PartitionLog]] = {}

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        topic_id: uuid.UUID | None = None,
        logs: Sequence[PartitionLog] | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> TopicInfo:
        """A topic of new MemoryLogs, or over `logs` (one per partition) made elsewhere."""
        plogs: list[PartitionLog] = (
            list(logs) if logs is not None else [MemoryLog() for _ in range(partitions)]
        )
        info = TopicInfo(name, topic_id or uuid.uuid4(), len(plogs), dict(configs or {}))
        self._topics[name] = info
        self._logs[name] = plogs
        return info

    def delete_topic(self, name: str) -> None:
        del self._topics[name]
        del self._logs[name]

    def topics(self) -> list[TopicInfo]:
        return list(self._topics.values())

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        plogs = self._logs.get(topic)
        return plogs[partition] if plogs is not None and 0 <= partition < len(plogs) else None

    def open_slice(self, topic: str, partition: int, slice_s: float = 0.02) -> bool:
        """Every log here is open (`LogManager.open_slice`)."""
        return True
