"""Share-group offsets for the admin APIs: describe (SPSO and lag), reset, delete (KIP-932).

- Describe: the share-partition start offset (SPSO), and the lag as Kafka 4.2 reports it
  (KIP-1226): records from SPSO to the log end not yet acknowledged or archived. Shoal keeps
  share state as control records in the partition's own log, and those are never delivered,
  so control records past SPEO are not lag either.
- Reset (AlterShareGroupOffsets): drop every in-flight state and delivery count and start the
  window at the new SPSO, made durable at once with a new SHARE_CHECKPOINT.
- Delete (DeleteShareGroupOffsets, DeleteGroups): the share-partition is forgotten; the next
  member starts it again from `share.auto.offset.reset`. Recovery would find the old records
  in the log, so a last, empty checkpoint is written as a tombstone: its window starts at the
  log start (earliest: the checkpoint says 0, recovery lifts it to the log start) or at the log
  end as of the delete (latest). The snapshot file goes, so retention is no longer held back.

Only for empty groups: the handlers check membership first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.context import BrokerServices
from broker.share.record_state import RecordState
from coordinator.share_group_admin import ShareGroupAdmin
from protocol.share_state import ShareCheckpoint
from storage.errors import OffsetOutOfRange
from storage.errors import StorageError
from storage.share_state_store import next_epoch
from storage.topics import TopicInfo

# Counting control records past SPEO reads batch headers; a far-behind group costs at most this.
LAG_SCAN_BYTES = 8 * 1024 * 1024
_SCAN_CHUNK = 1024 * 1024
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """A share-partition as the admin APIs see it; SPSO -1 when it was never initialised."""

    start_offset: int
    end_offset: int = -1
    lag: int = -1
    available: int = 0
    acquired: int = 0
    acknowledged: int = 0
    archived: int = 0

    def extension(self) -> str:
        """Shoal's extra detail, carried in the (otherwise unused) success error_message."""
        return (
            f"speo={self.end_offset} available={self.available} acquired={self.acquired} "
            f"acknowledged={self.acknowledged} archived={self.archived}"
        )


def durable_groups(services: BrokerServices) -> set[str]:
    """Groups with share-partition state on disk (a snapshot file on some partition)."""
    state_dir = services.share_partitions.state_dir
    if state_dir is None or not state_dir.exists():
        return set()
    groups: set[str] = set()
    for path in state_dir.glob("*/*.snapshot"):
        try:
            groups.add(str(json.loads(path.read_text())["group_id"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return groups


def group_admin(services: BrokerServices) -> ShareGroupAdmin:
    """Group-level admin that also knows the groups with only durable state."""
    return ShareGroupAdmin(services.coordinator, lambda: durable_groups(services))


class ShareGroupOffsets:
    def __init__(self, services: BrokerServices) -> None:
        self._s = services

    # -- which share-partitions a group has ------------------------------------------------

    def initialised(self, group_id: str, topic: TopicInfo, partition: int) -> bool:
        manager = self._s.share_partitions
        if any(
            sp.topic_id == topic.topic_id and sp.partition == partition
            for sp in manager.partitions_of(group_id)
        ):
            return True
        store = manager.store(topic.name, partition)
        return store is not None and store.read_snapshot(group_id) is not None

    def partitions(self, group_id: str) -> list[tuple[TopicInfo, int]]:
        """Every initialised share-partition of the group, by topic name and partition."""
        out = [
            (topic, p)
            for topic in sorted(self._s.logs.topics(), key=lambda t: t.name)
            for p in range(topic.partitions)
            if self.initialised(group_id, topic, p)
        ]
        return out

    # -- describe ---------------------------------------------------------------------------

    def describe(self, group_id: str, topic: TopicInfo, partition: int) -> PartitionOffsets:
        if not self.initialised(group_id, topic, partition):
            return PartitionOffsets(-1)
        sp = self._s.share_partitions.get(group_id, topic.topic_id, partition, self._s.now_ms())
        plog = self._s.logs.log(topic.name, partition)
        if sp is None or plog is None:
            return PartitionOffsets(-1)
        counts = dict.fromkeys(RecordState, 0)
        for b in sp.in_flight():
            counts[b.state] += b.size
        done = counts[RecordState.ACKNOWLEDGED] + counts[RecordState.ARCHIVED]
        end = plog.log_end_offset
        lag = end - sp.spso - done - self._control_records(topic.name, partition, sp.speo, end)
        return PartitionOffsets(
            sp.spso,
            sp.speo,
            max(lag, 0),
            counts[RecordState.AVAILABLE],
            counts[RecordState.ACQUIRED],
            counts[RecordState.ACKNOWLEDGED],
            counts[RecordState.ARCHIVED],
        )

    def _control_records(self, topic: str, partition: int, start: int, end: int) -> int:
        """Offsets in [start, end) held by control batches (share state, markers), bounded."""
        plog = self._s.logs.log(topic, partition)
        if plog is None:
            return 0
        offset, count, budget = max(start, plog.log_start_offset), 0, LAG_SCAN_BYTES
        while offset < end and budget > 0:
            try:
                spans = plog.batch_spans(offset, min(_SCAN_CHUNK, budget))
            except OffsetOutOfRange:
                break
            if not spans:
                break
            for s in spans:
                if s.is_control and s.last_offset >= offset:
                    count += min(s.last_offset, end - 1) - max(s.base_offset, offset) + 1
            budget -= spans[-1].position_in_result + spans[-1].size
            offset = spans[-1].last_offset + 1
        return count

    # -- reset ------------------------------------------------------------------------------

    def reset(self, group_id: str, topic: TopicInfo, partition: int, offset: int) -> ErrorCode:
        """Start the share-partition at `offset` (clamped to the log), durably."""
        plog = self._s.logs.log(topic.name, partition)
        if plog is None:
            return ErrorCode.unknown_topic_or_partition
        if offset < 0:
            return ErrorCode.invalid_request
        now = self._s.now_ms()
        manager = self._s.share_partitions
        sp = manager.get(group_id, topic.topic_id, partition, now)
        if sp is None:
            return ErrorCode.unknown_topic_or_partition
        start = min(max(offset, plog.log_start_offset), plog.log_end_offset)
        try:
            manager.persister.write_reset(sp, start, now)  # durable first, then in memory
        except StorageError as e:
            return e.error_code
        sp.reset(start)
        return ErrorCode.none

    # -- delete -----------------------------------------------------------------------------

    def delete(self, group_id: str, topic: TopicInfo, partition: int) -> None:
        """Forget the share-partition: a tombstone checkpoint, no snapshot, nothing in memory.

        :raises storage.errors.KafkaStorageError: the tombstone was not written; nothing changed.
        """
        manager = self._s.share_partitions
        store = manager.store(topic.name, partition)
        plog = self._s.logs.log(topic.name, partition)
        state = store.recover(group_id) if store is not None else None
        if store is not None and plog is not None and state is not None:
            earliest = (
                self._s.group_configs.effective(group_id, "share.auto.offset.reset") == "earliest"
            )
            start = 0 if earliest else plog.log_end_offset
            epoch = next_epoch(state.checkpoint_epoch)
            store.append(ShareCheckpoint(group_id, epoch, start, start, ()), self._s.now_ms())
        manager.drop(group_id, topic.topic_id, partition)
        if store is not None:
            store.delete_snapshot(group_id)

    def delete_group(self, group_id: str) -> None:
        """Drop every share-partition of a deleted group (its configs must be gone already)."""
        for topic, partition in self.partitions(group_id):
            self.delete(group_id, topic, partition)
        self._s.share_partitions.drop_group(group_id)
