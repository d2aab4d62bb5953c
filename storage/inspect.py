"""Read-only views of a broker's data directory, for offline tools.

`shoal share-state dump` reads through here and nothing else of storage: this module offers
no way to append, delete or rewrite data, and it never changes a file of the data dir. A
partition is read from a private copy (in a temporary directory), opened as the broker opens
a log, so one that was not shut down cleanly is recovered as the broker's next start would,
in the copy only: an offline tool never repairs (or truncates) the broker's own files.

A data dir that a running broker holds (`storage.dir_lock`) is refused unless the caller
accepts reading it while it changes (`force_read_only`).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from protocol.share_state import ShareStateRecord
from storage.config import LogConfig
from storage.dir_checkpoints import had_clean_shutdown
from storage.dir_checkpoints import read_recovery_points
from storage.dir_lock import is_locked
from storage.errors import StorageException
from storage.errors import UnknownTopicOrPartition
from storage.log_manager import TOPICS_DIR
from storage.segment_log import CLEAN_SHUTDOWN
from storage.segment_log import SegmentLog
from storage.share_state_store import SHARE_STATE_DIR
from storage.share_state_store import ShareStateStore
from storage.topics import TopicInfo
from storage.topics import load_topics


class NotADataDirectory(StorageException):
    """The path holds no Shoal data (no topic metadata directory)."""


class DataDirectoryInUse(StorageException):
    """A running broker holds the data dir; reading it could see a half-written tail."""


@dataclass(frozen=True, slots=True)
class ShareStateChain:
    """One share-partition's current SHARE_CHECKPOINT and the SHARE_DELTAs chained to it."""

    snapshot_offset: int | None  # the SCO the snapshot file names, if there is one
    records: list[tuple[int, ShareStateRecord]]  # (offset, record), checkpoint first


class DataDirectory:
    """A broker's data directory (`log.dirs`), read offline."""

    def __init__(self, path: Path, *, force_read_only: bool = False) -> None:
        if not (path / TOPICS_DIR).is_dir():
            raise NotADataDirectory(f"{path} is not a Shoal data directory")
        if not force_read_only and is_locked(path):
            raise DataDirectoryInUse(
                f"{path} is in use by a running broker: stop it, read a copy, or pass "
                "--force-read-only to read it as it is now"
            )
        self.path = path
        topics, _ = load_topics(path / TOPICS_DIR)  # read once; an unreadable file is left out
        self._topics = {t.name: t for t in topics}

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self._topics)

    def partition_dir(self, topic: str, partition: int) -> Path:
        """The partition's log directory; raises UnknownTopicOrPartition if there is none."""
        info = self._topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            raise UnknownTopicOrPartition(f"no {topic}-{partition}")
        return self.path / f"{topic}-{partition}"

    def shut_down_cleanly(self, topic: str, partition: int) -> bool:
        """False if the log was not closed by a clean stop (a crash, or a broker running now):
        the data dir's marker, or the log's own from an older version."""
        directory = self.partition_dir(topic, partition)
        return had_clean_shutdown(self.path) or (directory / CLEAN_SHUTDOWN).exists()

    def share_state_chain(self, topic: str, partition: int, group_id: str) -> ShareStateChain:
        """The group's durable share state on one partition (no records: the group has none)."""
        log_dir = self.partition_dir(topic, partition)
        config = LogConfig().with_overrides(self._topics[topic].configs)
        with tempfile.TemporaryDirectory(prefix="shoal-inspect-") as tmp:
            # Opening a log may rebuild indexes and cut a torn tail: do it to a copy.
            copy = Path(shutil.copytree(log_dir, Path(tmp) / log_dir.name))
            plog = SegmentLog.open(
                copy, config, clean=had_clean_shutdown(self.path),
                recovery_point=read_recovery_points(self.path).get((topic, partition)),
            )  # fmt: skip
            try:
                store = ShareStateStore(plog, self.path / SHARE_STATE_DIR / log_dir.name)
                return ShareStateChain(store.read_snapshot(group_id), store.chain(group_id))
            finally:
                plog.close()
