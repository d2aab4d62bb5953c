"""Topics made and removed in steps, so that the slow part runs off the event loop.

Making a partition costs two fsyncs (its `partition.metadata` and its directory), 6 ms each on
an ordinary disk: a CreateTopics of 10,000 partitions took a minute, all of it on the event
loop. Each change here is split into steps: those that only touch the file system (`make`,
`record`, `move_aside`, `remove`) may run in a worker thread, since they share no state with
the rest of the broker; those that open or close logs and change what the broker serves
(`open`, `finish`, `close`) run on the caller's (the loop's) thread, one partition at a time if
it likes. `LogManager.create_topic` and friends run every step at once, in order: the same
files, written in the same order, as before.

Until `finish`, a new topic or its new partitions are invisible (their room under
max.broker.partitions is taken: see `LogManager.partition_count`); a deleted topic is invisible
from `LogManager.begin_delete` on. Changes of one topic name must not run concurrently (the
broker orders them: `broker.topic_admin`).
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import TYPE_CHECKING
from typing import NoReturn

import structlog

from storage.errors import KafkaStorageError
from storage.fsutil import fsync_dir
from storage.log import PartitionLog
from storage.topics import TopicInfo
from storage.topics import topic_file

if TYPE_CHECKING:
    from storage.log_manager import LogManager

_log = structlog.get_logger("shoal.storage")


class NewPartitions:
    """Partitions [first, info.partitions) of a topic being made or grown. `abandon` (after
    any failed step) leaves nothing behind: the partitions hold no data yet."""

    def __init__(self, manager: LogManager, info: TopicInfo, first: int) -> None:
        self._manager = manager
        self.info = info
        self.first = first
        self._made = first  # directories made (or set aside) so far: [first, _made)
        self.logs: dict[int, PartitionLog] = {}
        self._done = False

    @property
    def count(self) -> int:
        return self.info.partitions - self.first

    def make(self) -> None:
        """Every new partition's directory (one in the way is set aside). File system only: a
        worker thread may run it."""
        manager = self._manager
        if manager.data_dir is None:
            return
        for partition in range(self.first, self.info.partitions):
            directory = manager.set_aside(self.info.name, partition)
            self._made = partition + 1
            directory.mkdir(parents=True, exist_ok=True)

    def open(self, partition: int) -> None:
        """Open one new partition's log (after `make`), on the broker's thread; only a
        partition this process leads (with several processes on the data dir, the controller
        makes every partition's directory and its leader opens it)."""
        if self._manager.owns(self.info.topic_id, partition):
            self.logs[partition] = self._manager.open_log(self.info, partition, new=True)

    def record(self) -> None:
        """Write each new partition's `partition.metadata` (fsynced with its directory, which
        makes its first segment's entry durable), then the topic file: the commit point.
        File system only."""
        manager = self._manager
        if manager.data_dir is not None:
            for partition in range(self.first, self.info.partitions):
                directory = manager.partition_dir(self.info.name, partition)
                manager.write_metadata(directory, self.info.topic_id)
        manager.save(self.info)

    def finish(self) -> TopicInfo:
        """Serve the new partitions (after every `open` and `record`)."""
        self._manager.finish_new(self)
        self._done = True
        return self.info

    def abandon(self) -> None:
        """Undo the steps taken (closing logs, removing the directories made) and free the
        room taken; on the broker's thread. A no-op after `finish`."""
        if self._done:
            return
        self._done = True
        for log in self.logs.values():
            log.delete()
        manager = self._manager
        if manager.data_dir is not None:
            for partition in range(self.first, self._made):
                shutil.rmtree(manager.partition_dir(self.info.name, partition), ignore_errors=True)
        manager.release(self)

    def run_all(self) -> TopicInfo:
        """Every step, at once (the synchronous `LogManager` calls)."""
        try:
            self.make()
            for partition in range(self.first, self.info.partitions):
                self.open(partition)
            self.record()
        except OSError as e:
            failed(self, e)
        return self.finish()


def failed(change: NewPartitions, e: OSError) -> NoReturn:
    """Abandon `change` after `e`, and raise KAFKA_STORAGE_ERROR."""
    change.abandon()
    _log.error("partitions not created; nothing left behind", topic=change.info.name,
               error=str(e))  # fmt: skip
    raise KafkaStorageError(f"creating {change.info.name} failed: {e.strerror}") from e


class TopicDeletion:
    """A topic being deleted: out of service from the start, its directories renamed
    `<dir>.<id>-delete` and its topic file removed (the commit point: a restart then finishes
    the deletion instead of rebuilding the topic), its logs closed, its files removed."""

    def __init__(self, manager: LogManager, info: TopicInfo, logs: dict[int, PartitionLog]):
        self._manager = manager
        self.info = info
        self.logs = logs
        self._doomed: list[Path] = []

    def move_aside(self) -> None:
        """Rename the directories and remove the topic file, fsynced. File system only."""
        manager = self._manager
        if manager.data_dir is None:
            return
        info = self.info
        for partition in range(info.partitions):
            directory = manager.partition_dir(info.name, partition)
            target = directory.with_name(f"{directory.name}.{info.topic_id.hex}-delete")
            with contextlib.suppress(FileNotFoundError):
                directory.rename(target)
                self._doomed.append(target)
        fsync_dir(manager.data_dir)
        topic_file(manager.meta_dir, info).unlink(missing_ok=True)
        fsync_dir(manager.meta_dir)

    def close(self, partition: int) -> None:
        """Close one partition's log, on the broker's thread."""
        log = self.logs.pop(partition, None)
        if log is not None:
            log.delete()

    def remove(self) -> None:
        """Remove the renamed directories. File system only."""
        for directory in self._doomed:
            shutil.rmtree(directory, ignore_errors=True)

    def restore(self) -> None:
        """`move_aside` failed: serve the topic again (as a failed delete always did)."""
        self._manager.restore(self)

    def run_all(self) -> None:
        try:
            self.move_aside()
        except BaseException:
            self.restore()
            raise
        for partition in range(self.info.partitions):
            self.close(partition)
        self.remove()
