"""SharePartitionManager: the share-partition leaders of this broker.

A registry of every SharePartition (loaded on first use: recovered from its log, or started
at `share.auto.offset.reset`), and the entry point of every operation on them:

- fetch: one partition's part of a ShareFetch (`partition_reads.py`: read stored batches
  once, acquire over their headers, return the batches unchanged);
- commit: acknowledgements, lock expiry and departures, each planned, written through the
  Persister and only then applied (`share_changes.py`), and moves of the log start;
- bookkeeping after every change (`bookkeeping.py`: lock timer, wake-ups, records given up);
- dead letters, behind the `DeadLetters` protocol (`dead_letter_duty.py`).

What it needs from the rest of the broker comes in as protocols: the logs (`ShareLogs`), the
durable share state (`Persister`) and the counters (`ShareMetrics`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from broker.share.ack_job import AckJob
from broker.share.ack_runs import AckBatch
from broker.share.acquisition_lock_timer import AcquisitionLockTimer
from broker.share.bookkeeping import Bookkeeping
from broker.share.dead_letter_duty import DEAD_LETTER_BUDGET
from broker.share.dead_letter_duty import DeadLetterCopier
from broker.share.dead_letter_duty import DeadLetters
from broker.share.dead_letter_duty import NoDeadLetters
from broker.share.limits import GroupLimits
from broker.share.log_start_moves import LogStartMoves
from broker.share.partition_loading import load_recorded
from broker.share.partition_loading import open_partition
from broker.share.partition_reads import FetchedPartition
from broker.share.partition_reads import PartitionRead
from broker.share.partition_reads import read_and_acquire
from broker.share.persister import NoPersister
from broker.share.persister import Persister
from broker.share.share_changes import ShareChanges
from broker.share.share_logs import ShareLogs
from broker.share.share_metrics import NO_METRICS
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from coordinator.group_configs import GroupConfigs
from storage.config import scheduled_delivery


class SharePartitionManager:
    def __init__(
        self,
        logs: ShareLogs,
        configs: GroupConfigs,
        on_available: Callable[[str, int], None] = lambda topic, partition: None,
        *,
        persister: Persister | None = None,
        metrics: ShareMetrics = NO_METRICS,
        dead_letter_prefix: Callable[[], str] | None = lambda: "dlq.",
    ) -> None:
        self._logs = logs
        self._configs = configs
        self._group_limits = GroupLimits(configs)  # lock duration, key ordering: per fetch
        # None: share state is not durable (group.share.persister.class.name empty, unit tests)
        self._persister: Persister = persister if persister is not None else NoPersister()
        self._metrics = metrics
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        timer: AcquisitionLockTimer[SharePartitionKey] = AcquisitionLockTimer()
        self._book = Bookkeeping(logs, timer, metrics, lambda: self._dead_letters, on_available)
        self._changes = ShareChanges(
            self._partitions, logs, self._persister, metrics, timer, self._book
        )
        self._moves = LogStartMoves(self, self._persister, self._book)
        # KIP-1191: the dead-letter duty (None prefix: no dead-letter topics, nothing copied).
        self._dead_letters: DeadLetters = NoDeadLetters()
        if dead_letter_prefix is not None:
            self._dead_letters = DeadLetterCopier(
                self, logs, configs, self._persister, metrics,
                prefix=dead_letter_prefix, on_available=on_available,
            )  # fmt: skip

    @property
    def persister(self) -> Persister:
        return self._persister

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        """A deleted topic takes its share-partitions and share state with it."""
        self._changes.abandon(lambda k: k[1] == topic_id, ErrorCode.unknown_topic_or_partition)
        for key in [k for k in self._partitions if k[1] == topic_id]:
            del self._partitions[key]
        self._persister.forget_topic(topic, topic_id)

    # the registry -------------------------------------------------------------------------

    def get(
        self, group_id: str, topic_id: uuid.UUID, partition: int, now_ms: int
    ) -> SharePartition | None:
        """The share-partition: recovered from its log, or new with SPSO from
        `share.auto.offset.reset`."""
        key = (group_id, topic_id, partition)
        sp = self._partitions.get(key)
        if sp is not None:
            return sp
        sp = open_partition(self._logs, self._configs, self._persister, key, now_ms, self._metrics)
        if sp is None:
            return None
        self._partitions[sp.key] = sp  # sp.key: the topic's own id object (open_partition)
        self._book.arm_wake(sp, now_ms)  # records recovered waiting (retry backoff)
        if sp.archiving.count():  # copies a crash left unfinished are made again
            self._dead_letters.note(key)
        return sp

    def load_recorded(self, now_ms: Callable[[], int]) -> Iterator[None]:
        """Load every share-partition with state, yielding between (`load_recorded`)."""
        return load_recorded(self, self._persister, self._logs, now_ms)

    def partitions(self) -> Mapping[SharePartitionKey, SharePartition]:
        """Every loaded share-partition, by key (read only)."""
        return self._partitions

    def partitions_of(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in self._partitions.items() if g == group_id]

    def loaded(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition if it is loaded (else nobody holds any of its records)."""
        return self._partitions.get((group_id, topic_id, partition))

    def drop_group(self, group_id: str) -> None:
        self._changes.abandon(lambda k: k[0] == group_id, ErrorCode.group_id_not_found)
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]

    def lock_duration_ms(self, group_id: str) -> int:
        return self._group_limits(group_id).lock_duration_ms

    def key_ordered(self, group_id: str) -> bool:
        """A record may then be for one waiting fetch only: every waiter is woken, not one."""
        return self._group_limits(group_id).key_ordering

    # fetch ----------------------------------------------------------------------------------

    def acquirable(self, group_id: str, keys: Sequence[tuple[uuid.UUID, int]], now_ms: int) -> int:
        """How many of the share-partitions `keys` a fetch could acquire from: they exist and
        their window is not full (Kafka's `SharePartition.canAcquireRecords`). A ShareFetch
        shares MaxBytes among these."""
        count = 0
        partitions = self._partitions
        for topic_id, partition in keys:
            sp = partitions.get((group_id, topic_id, partition))
            if sp is None:  # not loaded yet: loaded now, or not there at all
                sp = self.get(group_id, topic_id, partition, now_ms)
            if sp is not None and sp.next_fetch_offset(now_ms) is not None:
                count += 1
        return count

    def fetch(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        max_bytes: int,
        max_records: int,
        now_ms: int,
        record_limit: bool = False,
        first_batch_max: int | None = None,
    ) -> FetchedPartition:
        """Acquire from one share-partition (`partition_reads.read_and_acquire`)."""
        sp = self.get(group_id, topic_id, partition, now_ms)
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        if sp is None or plog is None:
            return FetchedPartition(ErrorCode.unknown_topic_or_partition, b"", [])
        read = PartitionRead(
            member_id, max_bytes, max_records, now_ms, record_limit, first_batch_max,
            scheduled_delivery(topic.configs) if topic is not None else False,
        )  # fmt: skip
        return read_and_acquire(sp, plog, read, self._metrics, self._book.after)

    # commit: acknowledgements, departures, lock expiry (share_changes.py) ------------------

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Sequence[AckBatch],
        now_ms: int,
    ) -> ErrorCode:
        """Plan, write, apply, in one go (`ShareChanges.acknowledge`)."""
        return self._changes.acknowledge(
            (group_id, topic_id, partition), member_id, batches, now_ms
        )

    def acknowledge_in(
        self, sp: SharePartition, member_id: str, batches: Sequence[AckBatch], now_ms: int
    ) -> ErrorCode:
        """`acknowledge` on a loaded share-partition (`loaded`)."""
        return self._changes.acknowledge_in(sp, member_id, batches, now_ms)

    def begin_acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Iterable[AckBatch],
        now_ms: int,
        *,
        renew_allowed: bool = True,
    ) -> AckJob | ErrorCode:
        """Start an acknowledgement done in steps (`ShareChanges.begin_acknowledge`)."""
        key = (group_id, topic_id, partition)
        return self._changes.begin_acknowledge(
            key, member_id, batches, now_ms, renew_allowed=renew_allowed
        )

    def finish_acknowledgement(self, key: SharePartitionKey) -> None:
        """Step the acknowledgement in progress on `key`, if any, to its end now: for the
        rare change that cannot wait (admin operations; a synchronous caller)."""
        self._changes.finish_acknowledgement(key)

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> int:
        """A member left or timed out: everything it holds becomes available at once (or
        once the acknowledgement in progress on a share-partition is done)."""
        return self._changes.release_member(
            group_id, self.partitions_of(group_id), member_id, now_ms
        )

    def expire_locks(self, now_ms: int) -> int:
        """Run the acquisition-lock timer: expire every share-partition with a lock due."""
        return self._changes.expire_locks(now_ms)

    # dead letters (KIP-1191): the manager is the duty's host ------------------------------

    def copy_dead_letters(self, now_ms: int, budget: int = DEAD_LETTER_BUDGET) -> int:
        """One pass of the dead-letter duty, a broker duty off the fetch path: records copied
        or archived."""
        return self._dead_letters.run(now_ms, budget)

    def dead_letter_problem(self, group_id: str) -> str | None:
        """The last problem met copying the group's records, until a copy is archived."""
        return self._dead_letters.problem(group_id)

    def busy(self, key: SharePartitionKey) -> bool:
        """Whether an acknowledgement in progress holds the share-partition's state."""
        return self._changes.busy(key)

    def changed(self, sp: SharePartition, now_ms: int) -> None:
        """Bookkeeping after a change the dead-letter duty applied."""
        self._book.after(sp, now_ms)

    # the log start moves (DeleteRecords) ------------------------------------------------------

    def move_log_start(self, topic_id: uuid.UUID, partition: int, log_start: int, now: int) -> int:
        """`move_start_of` for every share-partition of the partition (`log_start_moves.py`)."""
        return self._moves.move_log_start(topic_id, partition, log_start, now)

    def share_partitions_on(self, topic_id: uuid.UUID, partition: int) -> list[SharePartitionKey]:
        """The share-partitions of one partition: loaded, or with durable state."""
        return self._moves.share_partitions_on(topic_id, partition)

    def move_start_of(self, key: SharePartitionKey, log_start: int, now_ms: int) -> int:
        """One share-partition's part of a log start move (`LogStartMoves.move_start_of`)."""
        return self._moves.move_start_of(key, log_start, now_ms)

    # admin (share-group offsets) -----------------------------------------------------------

    def durable_groups(self) -> frozenset[str]:
        """Groups with recorded share state (known after a restart, before any member joins)."""
        return self._persister.groups()

    def initialised(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether the share-partition was started, here or in a run before this one."""
        key = (group_id, topic_id, partition)
        return key in self._partitions or self._persister.has_state(key)

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int, now_ms: int) -> None:
        """Forget one share-partition durably; the next member starts it again from
        `share.auto.offset.reset`. Its tombstone starts at the log start (earliest: 0, which
        recovery lifts to the log start) or at the log end as of now (latest).

        :raises storage.errors.KafkaStorageError: nothing changed.
        """
        key = (group_id, topic_id, partition)
        self._changes.finish_acknowledgement(key)
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        earliest = self._configs.effective(group_id, "share.auto.offset.reset") == "earliest"
        start = 0 if earliest or plog is None else plog.log_end_offset
        self._persister.delete(key, start, now_ms)
        self._partitions.pop(key, None)
