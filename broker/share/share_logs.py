"""The logs the share layer reads: topics by id and name, and each partition's log.

The share layer needs a few lookups, not the whole LogManager (creation, deletion, limits,
flushing). LogManager has them, and so has `storage.memory_log.MemoryLogs`, with which the
share-partition manager is tested without a disk.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from storage.log import PartitionLog
from storage.topics import TopicInfo


class ShareLogs(Protocol):
    def topics(self) -> Sequence[TopicInfo]: ...

    def topic(self, name: str) -> TopicInfo | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log; None when the topic or partition does not exist."""
        ...

    def open_slice(self, topic: str, partition: int, slice_s: float = 0.02) -> bool:
        """Go on opening a log not open yet (recovered at the start) for about `slice_s`;
        True once it is open, or there is nothing to open.

        :raises storage.errors.KafkaStorageError: it cannot be opened.
        """
        ...
