"""Share-group offsets for the admin APIs: describe (SPSO and lag), reset, delete (KIP-932).

- Describe: the share-partition start offset (SPSO), and the lag as Kafka 4.2 reports it
  (KIP-1226): records from SPSO to the log end (the LSO for a read_committed group) not yet
  acknowledged or archived, in data records (`broker.share.lag`, which the metrics use too:
  the CLI and Prometheus agree).
- Reset (AlterShareGroupOffsets): drop every in-flight state and delivery count and start the
  window at the new SPSO, made durable at once with a new SHARE_CHECKPOINT.
- Delete (DeleteShareGroupOffsets, DeleteGroups): the share-partition is forgotten; the next
  member starts it again from `share.auto.offset.reset` (see `SharePartitionManager.delete`
  and `Persister.delete`: a tombstone checkpoint, and no snapshot file).

Only for empty groups: the handlers check membership first. Every share-state record goes
through the manager's Persister; this module writes none itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.share.lag import share_lag
from broker.share.record_state import RecordState
from broker.share.share_logs import ShareLogs
from broker.share.share_partition import SharePartitionKey
from broker.share.share_partition_manager import SharePartitionManager
from broker.slicing import Slicer
from coordinator.share_group import ShareGroupCoordinator
from coordinator.share_group_admin import ShareGroupAdmin
from storage.errors import StorageError
from storage.topics import TopicInfo


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
    control: int = 0  # offsets in the window that hold no user record (share state, markers)
    archiving: int = 0  # KIP-1191: given up on, waiting for their dead-letter copy
    delayed: int = 0  # of `available`, those that wait (retry backoff, scheduled delivery)

    def extension(self) -> str:
        """Shoal's extra detail, carried in the (otherwise unused) success error_message."""
        return (
            f"speo={self.end_offset} available={self.available} acquired={self.acquired} "
            f"acknowledged={self.acknowledged} archived={self.archived} "
            f"archiving={self.archiving} control={self.control} delayed={self.delayed}"
        )

    def summary(self) -> str:
        """The lag and the extension, as a leader's ReadShareGroupStateSummary (87) carries them
        to the group's coordinator in its (otherwise unused) success error_message: Kafka's
        coordinator asks the leaders for the latest offsets to compute the lag; Shoal's leader
        computes it (data records only, the LSO for read_committed) as for its own partitions."""
        return f"lag={self.lag} {self.extension()}"

    @classmethod
    def from_summary(cls, start_offset: int, message: str | None) -> PartitionOffsets:
        """What `summary` wrote, read back; words missing or malformed count as -1 or 0."""
        words: dict[str, int] = {}
        for word in (message or "").split():
            name, _, value = word.partition("=")
            try:
                words[name] = int(value)
            except ValueError:
                continue
        if start_offset < 0:
            return cls(-1)
        return cls(
            start_offset,
            words.get("speo", -1),
            words.get("lag", -1),
            *(words.get(n, 0) for n in _COUNTS),
        )


_COUNTS = ("available", "acquired", "acknowledged", "archived", "control", "archiving", "delayed")


def group_admin(
    coordinator: ShareGroupCoordinator, manager: SharePartitionManager
) -> ShareGroupAdmin:
    """Group-level admin that also knows the groups with only durable state."""
    return ShareGroupAdmin(coordinator, manager.durable_groups)


class ShareGroupOffsets:
    def __init__(
        self, manager: SharePartitionManager, logs: ShareLogs, now_ms: Callable[[], int]
    ) -> None:
        self._manager = manager
        self._logs = logs
        self._now_ms = now_ms

    # -- which share-partitions a group has ------------------------------------------------

    def initialised(self, group_id: str, topic: TopicInfo, partition: int) -> bool:
        return self._manager.initialised(group_id, topic.topic_id, partition)

    def partitions(self, group_id: str) -> list[tuple[TopicInfo, int]]:
        """Every initialised share-partition of the group, by topic name and partition."""
        out = []
        for _, topic_id, p in self._started(group_id):
            topic = self._logs.topic_by_id(topic_id)
            if topic is not None and p < topic.partitions:
                out.append((topic, p))
        out.sort(key=lambda tp: (tp[0].name, tp[1]))
        return out

    def _started(self, group_id: str) -> set[SharePartitionKey]:
        """The group's share-partitions `initialised` says were started, from what is loaded
        and what is recorded, not by asking each partition of the broker (a `has_state` per
        partition opened a file each: 2,000 partitions held the loop ~50 ms for a group
        started on 40)."""
        keys = {k for k in self._manager.partitions() if k[0] == group_id}
        persister = self._manager.persister
        keys.update(
            k for k in persister.recorded()
            if k[0] == group_id and k not in keys and persister.has_state(k)
        )  # fmt: skip
        return keys

    # -- describe ---------------------------------------------------------------------------

    def describe(self, group_id: str, topic: TopicInfo, partition: int) -> PartitionOffsets:
        if not self.initialised(group_id, topic, partition):
            return PartitionOffsets(-1)
        sp = self._manager.get(group_id, topic.topic_id, partition, self._now_ms())
        plog = self._logs.log(topic.name, partition)
        if sp is None or plog is None:
            return PartitionOffsets(-1)
        counts = dict.fromkeys(RecordState, 0)
        for b in sp.in_flight():
            counts[b.state] += b.size
        for _ in plog.learn_non_data():  # done already (the handler walks in slices): a fallback
            pass
        # The window archives control offsets as it passes them; they are not user records,
        # so they are shown apart rather than as ARCHIVED (nothing was rejected).
        control = plog.non_data_offsets(sp.spso, sp.speo)
        archived = counts[RecordState.ARCHIVED]
        return PartitionOffsets(
            sp.spso,
            sp.speo,
            share_lag(sp, plog),
            counts[RecordState.AVAILABLE],
            counts[RecordState.ACQUIRED],
            counts[RecordState.ACKNOWLEDGED],
            max(archived - control, 0),
            control=min(control, archived),
            archiving=counts[RecordState.ARCHIVING],
            delayed=sp.delayed_count(self._now_ms()),
        )

    # -- reset ------------------------------------------------------------------------------

    def reset(self, group_id: str, topic: TopicInfo, partition: int, offset: int) -> ErrorCode:
        """Start the share-partition at `offset` (clamped to the log), durably."""
        plog = self._logs.log(topic.name, partition)
        if plog is None:
            return ErrorCode.unknown_topic_or_partition
        if offset < 0:
            return ErrorCode.invalid_request
        now = self._now_ms()
        manager = self._manager
        sp = manager.get(group_id, topic.topic_id, partition, now)
        if sp is None:
            return ErrorCode.unknown_topic_or_partition
        start = min(max(offset, plog.log_start_offset), plog.log_end_offset)
        manager.finish_acknowledgement(sp.key)  # a departed member's closing acks come first
        try:
            manager.persister.initialise(sp.key, start, now)  # durable first, then in memory
        except StorageError as e:
            return e.error_code
        sp.reset(start)
        return ErrorCode.none

    # -- delete -----------------------------------------------------------------------------

    def delete(self, group_id: str, topic: TopicInfo, partition: int) -> None:
        """Forget the share-partition: a tombstone checkpoint, no snapshot, nothing in memory.

        :raises storage.errors.KafkaStorageError: the tombstone was not written; nothing changed.
        """
        self._manager.delete(group_id, topic.topic_id, partition, self._now_ms())

    async def delete_group(self, group_id: str, still_empty: Callable[[], bool]) -> bool:
        """Drop every share-partition of a deleted group (its configs must be gone already), a
        slice at a time: each is a tombstone written (~0.1-0.2 ms), and a group may have
        started thousands. A member that joins the group again meanwhile (`still_empty` turns
        False after a pause) stops it, the partitions not yet dropped kept for it; whether all
        were dropped.

        :raises storage.errors.KafkaStorageError: a tombstone was not written.
        """
        slicer = Slicer()
        for topic, partition in self.partitions(group_id):
            self.delete(group_id, topic, partition)
            yields = slicer.yields
            await slicer.pause()
            if slicer.yields != yields and not still_empty():
                return False
        self._manager.drop_group(group_id)
        return True
