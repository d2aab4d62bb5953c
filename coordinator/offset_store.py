"""Committed offsets of consumer groups: an in-memory map over the internal compacted log.

Every commit is appended to `__consumer_offsets` (`storage`'s internal log, compacted: the
cleaner keeps the latest record per key) as Kafka's own records (`protocol.consumer_offsets`),
and only then applied in memory, so memory is never ahead of what recovery rebuilds. A commit
is acknowledged after the append, flushed as the log's `flush.messages` says, as a produced
record is: an acknowledged commit survives kill -9 exactly as an acks=-1 record does. At start
the log is replayed into the map; reads never touch the disk. A tombstone (null value) deletes.

Who may commit is not decided here: each `CommitValidator` (a group coordinator) gives its
verdict on the groups it knows. A group no validator knows takes commits from anyone, as
Kafka's "simple" consumers (member "" and generation -1) and the admin client do.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Protocol

import structlog
from kio.schema.errors import ErrorCode

from coordinator.group_registry import GroupKind
from coordinator.share_group_admin import GroupListing
from coordinator.staged_offsets import StagedOffsets
from protocol.consumer_offsets import InvalidOffsetRecord
from protocol.consumer_offsets import OffsetKey
from protocol.consumer_offsets import OffsetRecords
from protocol.consumer_offsets import OffsetValue
from protocol.consumer_offsets import decode_key
from protocol.consumer_offsets import decode_value
from protocol.consumer_offsets import encode_key
from protocol.consumer_offsets import encode_value
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import BatchHeader
from protocol.record_batch import ControlRecordType
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.records import decode_records
from protocol.records import record_value
from protocol.txn_markers import marker_type
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.topics import CONSUMER_OFFSETS

_log = structlog.get_logger("shoal.offsets")

# Kafka's offsets topic: compacted, 100 MiB segments (offsets.topic.segment.bytes).
OFFSETS_LOG_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
RECOVERY_READ_BYTES = 1024 * 1024
TopicPartition = tuple[str, int]


class CommitValidator(Protocol):
    def check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode | None:
        """None: this coordinator does not know the group; else its verdict (`none`: allowed)."""
        ...


class GroupMembership(Protocol):
    """What a group coordinator tells the store about the groups it runs."""

    def has_group(self, group_id: str) -> bool:
        """Whether the coordinator knows the group (its offsets do not expire here)."""
        ...

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """Whether a live member of the group subscribes to `topic` (OffsetDelete refuses)."""
        ...


class OffsetStore:
    def __init__(
        self,
        log: PartitionLog,
        now_ms: Callable[[], int],
        validators: Sequence[CommitValidator] = (),
        coordinators: Sequence[GroupMembership] = (),
        other_records: Callable[[bytes, bytes | None], None] | None = None,
    ) -> None:
        self._log = log
        # Given each replayed record that is no offset (a share group's, `share_group_records`).
        self._other_records = other_records
        self._now_ms = now_ms
        self.validators = list(validators)
        self.coordinators = list(coordinators)
        self._groups: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self.staged = StagedOffsets()
        self._recover()

    @classmethod
    def open(
        cls, logs: LogManager, now_ms: Callable[[], int],
        other_records: Callable[[bytes, bytes | None], None] | None = None,
    ) -> OffsetStore:  # fmt: skip
        """The store over the data dir's `__consumer_offsets`, recovered from it."""
        log = logs.internal_log(CONSUMER_OFFSETS, OFFSETS_LOG_CONFIGS)
        return cls(log, now_ms, other_records=other_records)

    # --- recovery ---------------------------------------------------------------------

    def _recover(self) -> None:
        offset, end = self._log.log_start_offset, self._log.log_end_offset
        while offset < end:
            data = self._log.read(offset, RECOVERY_READ_BYTES)
            if not data:
                break
            for pos, header in iter_batch_headers(data):
                offset = header.base_offset + header.last_offset_delta + 1
                if header.record_count == 0:
                    continue
                batch = data[pos : pos + header.size]
                if header.is_control:  # a transaction's marker: its staged offsets end
                    if header.producer_id >= 0:
                        self._replay_marker(batch, header.producer_id, header.producer_epoch)
                elif header.attributes & TRANSACTIONAL_MASK:  # staged (`staged_offsets`)
                    self._replay(batch, header.base_offset, self._stager(header))
                else:
                    self._replay(batch, header.base_offset, self._apply, self._other_records)
        _log.info("committed offsets recovered", groups=len(self._groups),
                  partitions=sum(map(len, self._groups.values())), log_end=end)  # fmt: skip

    def _replay(
        self, batch: bytes, base_offset: int,
        apply: Callable[[OffsetKey, OffsetValue | None], None],
        other: Callable[[bytes, bytes | None], None] | None = None,
    ) -> None:  # fmt: skip
        try:
            _, records = decode_records(batch)
            for record in records:
                key = decode_key(record.key) if record.key is not None else None
                if key is not None:
                    value = record_value(record)
                    apply(key, decode_value(value) if value is not None else None)
                elif other is not None and record.key is not None:
                    other(record.key, record_value(record))
        except (InvalidRecordBatch, InvalidOffsetRecord) as e:
            _log.error("unreadable committed-offset batch stepped over",
                       base_offset=base_offset, error=str(e))  # fmt: skip

    def _stager(self, header: BatchHeader) -> Callable[[OffsetKey, OffsetValue | None], None]:
        def stage(key: OffsetKey, value: OffsetValue | None) -> None:
            if value is not None:
                offsets = {(key.topic, key.partition): value}
                self.staged.stage(header.producer_id, header.producer_epoch, key.group, offsets)

        return stage

    def _replay_marker(self, batch: bytes, producer_id: int, epoch: int) -> None:
        try:
            commit = marker_type(batch) == ControlRecordType.COMMIT
        except InvalidRecordBatch as e:
            _log.error("unreadable transaction marker stepped over", error=str(e))
            return
        for group, offsets in self.staged.end(producer_id, epoch, commit).items():
            self._groups.setdefault(group, {}).update(offsets)

    def _apply(self, key: OffsetKey, value: OffsetValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is not None:
            self._groups.setdefault(key.group, {})[tp] = value
            return
        offsets = self._groups.get(key.group)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._groups[key.group]

    # --- commits ----------------------------------------------------------------------

    def check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode:
        """The first verdict of a validator that knows the group; else accepted."""
        for validator in self.validators:
            verdict = validator.check_commit(group_id, member_id, generation_id, group_instance_id)
            if verdict is not None:
                return verdict
        return ErrorCode.none

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetValue]) -> None:
        """Append the offsets as one batch, then apply them. Nothing changes if it fails.

        :raises storage.errors.StorageError: not written (KAFKA_STORAGE_ERROR).
        """
        records = OffsetRecords(group_id)
        for (topic, partition), value in offsets.items():
            records.add(topic, partition, value)
        self.write_commit(group_id, offsets, records)

    def write_commit(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetValue], records: OffsetRecords
    ) -> None:
        """`commit` of offsets whose `records` the caller encoded (a request of 100,000
        partitions encodes them in slices, yielding between): appended as one batch, then
        applied at once (a dict update, not a loop), so no read sees half a commit and two
        commits of a group apply in the order they were written.

        :raises storage.errors.StorageError: not written (KAFKA_STORAGE_ERROR); nothing changed.
        """
        if not offsets:
            return
        now = self._now_ms()
        self._log.append(records.batch(now), now_ms=now, keyed=True)
        self._groups.setdefault(group_id, {}).update(offsets)

    # --- transactions coordinated by another process (`staged_offsets`) ------------------

    def stage_txn(
        self, producer_id: int, epoch: int, group_id: str,
        offsets: Mapping[TopicPartition, OffsetValue],
    ) -> None:  # fmt: skip
        """Write the offsets as a transactional batch of the producer and stage them: the
        group's committed offsets only once the transaction's COMMIT marker is written here.

        :raises storage.errors.StorageError: not written (an older epoch than the producer's
            here: InvalidProducerEpoch); nothing changed.
        """
        if not offsets:
            return
        records = OffsetRecords(group_id)
        for (topic, partition), value in offsets.items():
            records.add(topic, partition, value)
        # The producer's next sequence in this log: the log checks it, as for any producer.
        last = next((seq for pid, e, seq, *_ in self._log.active_producers()
                     if pid == producer_id and e == epoch), -1)  # fmt: skip
        now = self._now_ms()
        batch = records.batch(now, (producer_id, epoch, last + 1))
        self._log.append(batch, now_ms=now, keyed=True)
        self.staged.stage(producer_id, epoch, group_id, dict(offsets))

    def end_txn(self, producer_id: int, epoch: int, commit: bool) -> None:
        """The transaction's marker, written after what it staged here (also when it staged
        nothing, as Kafka writes it: a fencing abort's epoch then refuses a TxnOffsetCommit of
        the older epoch verified before it); on COMMIT its offsets become the groups'
        committed offsets.

        :raises storage.errors.StorageError: not written; nothing changed.
        """
        self._log.append_marker(producer_id, epoch, commit, now_ms=self._now_ms())
        for group, offsets in self.staged.end(producer_id, epoch, commit).items():
            self._groups.setdefault(group, {}).update(offsets)

    def _write(self, changes: Mapping[OffsetKey, OffsetValue | None]) -> None:
        if not changes:
            return
        now = self._now_ms()
        records = [
            (encode_key(k), encode_value(v) if v is not None else None) for k, v in changes.items()
        ]
        self._log.append(build_batch(records, timestamp_ms=now), now_ms=now, keyed=True)
        for key, value in changes.items():
            self._apply(key, value)

    # --- reads ------------------------------------------------------------------------

    def groups(self) -> set[str]:
        """Groups with at least one committed offset."""
        return set(self._groups)

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def empty_group_listings(
        self,
        known: Callable[[str], bool],
        states: Collection[str] = (),
        types: Collection[str] = (),
    ) -> list[GroupListing]:
        """Groups that are only committed offsets (not `known`: held by no coordinator):
        Kafka's Empty consumer groups, as ListGroups lists them."""
        if types and GroupKind.CONSUMER not in {t.lower() for t in types}:
            return []
        if states and "empty" not in {s.lower() for s in states}:
            return []
        return [
            GroupListing(g, "Empty", group_type=GroupKind.CONSUMER.value, protocol_type="consumer")
            for g in sorted(self._groups)
            if not known(g)
        ]

    def fetch(self, group_id: str, topic: str, partition: int) -> OffsetValue | None:
        return self._groups.get(group_id, {}).get((topic, partition))

    def group_offsets(self, group_id: str) -> dict[TopicPartition, OffsetValue]:
        return dict(self._groups.get(group_id, {}))

    def committed_snapshot(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of every commit, copied whole (`list` of a
        dict's items holds the GIL): safe to call from the metrics thread."""
        return [
            (group, topic, partition, value.offset)
            for group, offsets in list(self._groups.items())
            for (topic, partition), value in list(offsets.items())
        ]

    def all_offsets(self) -> Iterable[tuple[str, TopicPartition, OffsetValue]]:
        for group_id, offsets in self._groups.items():
            for tp, value in offsets.items():
                yield group_id, tp, value

    # --- deletes ----------------------------------------------------------------------

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        return any(c.is_subscribed(group_id, topic) for c in self.coordinators)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Tombstones for the group's committed partitions among `partitions`.

        :raises storage.errors.StorageError: not written; nothing changed.
        """
        known = self._groups.get(group_id, {})
        self._write({OffsetKey(group_id, t, p): None for t, p in partitions if (t, p) in known})

    def delete_group(self, group_id: str) -> None:
        """Tombstones for every committed offset of the group (DeleteGroups).

        :raises storage.errors.StorageError: not written; nothing changed.
        """
        self.delete_offsets(group_id, list(self._groups.get(group_id, {})))

    def expire(self, now_ms: int, retention_ms: int) -> int:
        """`offsets.retention.minutes`: tombstones for offsets committed `retention_ms` ago or
        more, in groups no coordinator knows (Kafka's rule for groups without members: each
        offset expires on its own commit timestamp). How many expired.

        :raises storage.errors.StorageError: not written; nothing changed.
        """
        doomed: dict[OffsetKey, OffsetValue | None] = {
            OffsetKey(group_id, t, p): None
            for group_id, offsets in self._groups.items()
            if not any(c.has_group(group_id) for c in self.coordinators)
            for (t, p), value in offsets.items()
            if value.commit_timestamp_ms + retention_ms <= now_ms
        }
        self._write(doomed)
        return len(doomed)

    def delete_topic(self, topic: str) -> None:
        """Every group's offsets of a deleted topic.

        :raises storage.errors.StorageError: not written; nothing changed.
        """
        self._write(
            {
                OffsetKey(group_id, t, p): None
                for group_id, (t, p), _ in self.all_offsets()
                if t == topic
            }
        )
