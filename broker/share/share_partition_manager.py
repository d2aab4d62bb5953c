"""SharePartitionManager: the share-partition leaders of this broker.

Owns every SharePartition, the broker-wide acquisition-lock timer, and the path from a
ShareFetch to log bytes: ask the SharePartition where to read, read stored batches once (with
their header spans), acquire ranges over those spans, and return the bytes of the batches that
hold acquired records, unchanged. Records are never decoded.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from kio.schema.errors import ErrorCode

from broker.metrics import ACK_TYPE_NAMES
from broker.metrics import BrokerMetrics
from broker.share.acquisition_lock_timer import AcquisitionLockTimer
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import AckBatch
from broker.share.share_partition import AcquiredRecords
from broker.share.share_partition import BatchSpan
from broker.share.share_partition import Plan
from broker.share.share_partition import ShareLimits
from broker.share.share_partition import SharePartition
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import GroupConfigs
from storage.errors import CorruptRecords
from storage.errors import OffsetOutOfRange
from storage.errors import StorageError
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.share_state_store import ShareStateStore

log = structlog.get_logger("shoal.share")

SharePartitionKey = tuple[str, uuid.UUID, int]
# One ShareFetch reads at most this much of a partition's log: MaxBytes is 50 MiB from
# librdkafka while MaxRecords is 500, and reading 50 MiB to hand out 500 records is waste.
# At least one whole batch is always read, however large.
READ_CHUNK_BYTES = 1024 * 1024
MAX_READS_PER_FETCH = 8
RETRY_WRITE_MS = 1000  # a lock expiry whose share-state write failed is tried again after this
ARCHIVED = RecordState.ARCHIVED
REJECT = int(AcknowledgeType.REJECT)


def count_ack_types(batches: Sequence[AckBatch]) -> dict[int, int]:
    """Records per acknowledge type: ranges count whole, per-offset type lists by type."""
    counts: dict[int, int] = {}
    for first, last, types in batches:
        if len(types) == 1:
            counts[types[0]] = counts.get(types[0], 0) + last - first + 1
        else:
            for t in set(types):
                counts[t] = counts.get(t, 0) + list(types).count(t)
    return counts


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    error_code: ErrorCode
    records: bytes
    acquired: list[AcquiredRecords]


def limits_of(configs: GroupConfigs, group_id: str) -> Callable[[], ShareLimits]:
    """The group's effective limits, recomputed only after a group config changed."""
    cached: list[tuple[int, ShareLimits]] = []

    def limits() -> ShareLimits:
        if cached and cached[0][0] == configs.version:
            return cached[0][1]
        value = ShareLimits(
            delivery_count_limit=configs.effective(group_id, "share.delivery.count.limit"),
            max_record_locks=configs.effective(group_id, "share.partition.max.record.locks"),
            lock_duration_ms=configs.effective(group_id, "share.record.lock.duration.ms"),
            renew_enabled=configs.effective(group_id, "share.renew.acknowledge.enable"),
        )
        cached[:] = [(configs.version, value)]
        return value

    return limits


class SharePartitionManager:
    def __init__(
        self,
        logs: LogManager,
        configs: GroupConfigs,
        on_available: Callable[[str, int], None] = lambda topic, partition: None,
        *,
        state_dir: Path | None = None,
        max_deltas: int = 100,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.metrics = metrics or BrokerMetrics()
        self._logs = logs
        self._configs = configs
        self._on_available = on_available  # wakes long polls when records come back
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._timer: AcquisitionLockTimer[SharePartitionKey] = AcquisitionLockTimer()
        self._state_dir = state_dir  # None: share state is not durable (unit tests)
        self._stores: dict[tuple[str, int], ShareStateStore] = {}
        self.persister = ShareStatePersister(self._store_for, max_deltas=max_deltas)

    def _store_for(self, sp: SharePartition) -> ShareStateStore | None:
        topic = self._logs.topic_by_id(sp.topic_id)
        return self.store(topic.name, sp.partition) if topic else None

    def store(self, topic: str, partition: int) -> ShareStateStore | None:
        """The share-state records and snapshot files of one partition."""
        if self._state_dir is None:
            return None
        store = self._stores.get((topic, partition))
        if store is None:
            plog = self._logs.log(topic, partition)
            if plog is None:
                return None
            store = self._stores[(topic, partition)] = ShareStateStore(
                plog, self._state_dir / f"{topic}-{partition}"
            )
        return store

    def earliest_share_offsets(self) -> dict[tuple[str, int], int]:
        """ESO per partition: the lowest SCO of any group; retention keeps control records
        from it on."""
        eso: dict[tuple[str, int], int] = {}
        for topic in self._logs.topics():
            for p in range(topic.partitions):
                store = self.store(topic.name, p)
                offsets = store.snapshot_offsets() if store else []
                if offsets:
                    eso[(topic.name, p)] = min(offsets)
        return eso

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        """A deleted topic takes its share-partitions and share-state files with it."""
        for key in [k for k in self._partitions if k[1] == topic_id]:
            self.persister.forget(self._partitions.pop(key))
        for store_key in [k for k in self._stores if k[0] == topic]:
            del self._stores[store_key]
        if self._state_dir is not None:
            for path in self._state_dir.glob(f"{topic}-*"):
                if path.name.rpartition("-")[0] == topic:
                    shutil.rmtree(path, ignore_errors=True)

    def flush_snapshots(self, now_ms: int) -> None:
        self.persister.flush_snapshots(list(self._partitions.values()), now_ms)

    # lookup ------------------------------------------------------------------------------------

    def get(
        self, group_id: str, topic_id: uuid.UUID, partition: int, now_ms: int
    ) -> SharePartition | None:
        """The share-partition: recovered from its log, or new with SPSO from
        `share.auto.offset.reset`."""
        key = (group_id, topic_id, partition)
        sp = self._partitions.get(key)
        if sp is not None:
            return sp
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        if plog is None:
            return None
        earliest = self._configs.effective(group_id, "share.auto.offset.reset") == "earliest"
        start = plog.log_start_offset if earliest else plog.log_end_offset
        sp = SharePartition(
            group_id,
            topic_id,
            partition,
            start_offset=start,
            limits=limits_of(self._configs, group_id),
        )
        self.persister.initialise(sp, plog.log_start_offset, now_ms)
        self._partitions[key] = sp
        return sp

    def all_partitions(self) -> list[SharePartition]:
        return list(self._partitions.values())

    def partitions_of(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in self._partitions.items() if g == group_id]

    def drop_group(self, group_id: str) -> None:
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]

    def lock_duration_ms(self, group_id: str) -> int:
        value: int = self._configs.effective(group_id, "share.record.lock.duration.ms")
        return value

    # fetch and acknowledge ---------------------------------------------------------------------

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
    ) -> FetchedPartition:
        sp = self.get(group_id, topic_id, partition, now_ms)
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        if sp is None or plog is None:
            return FetchedPartition(ErrorCode.unknown_topic_or_partition, b"", [])
        if max_records <= 0:
            return FetchedPartition(ErrorCode.none, b"", [])
        # A read may find only control batches (share state written between data): they are
        # skipped, and the next stretch of log is read, a bounded number of times.
        for _ in range(MAX_READS_PER_FETCH):
            offset = sp.next_fetch_offset()
            if offset is None or offset >= plog.log_end_offset:
                break
            fetched = self._acquire(sp, plog, member_id, offset, max_bytes, max_records, now_ms)
            if fetched is not None:
                return fetched
            if sp.next_fetch_offset() == offset:
                break
        return FetchedPartition(ErrorCode.none, b"", [])

    def _acquire(
        self,
        sp: SharePartition,
        plog: PartitionLog,
        member_id: str,
        offset: int,
        max_bytes: int,
        max_records: int,
        now_ms: int,
    ) -> FetchedPartition | None:
        """Read once from `offset` and acquire what the read holds; None if nothing."""
        # Enough batches for max_records new records past whatever is in flight after `offset`.
        wanted = max_records + max(0, sp.speo - offset)
        start = max(offset, plog.log_start_offset)
        try:
            data, spans = plog.read_with_spans(start, min(max_bytes, READ_CHUNK_BYTES), wanted)
        except OffsetOutOfRange:
            return None
        except CorruptRecords as e:
            # Storage has logged and counted the damage. Read on past it: the damaged offsets
            # are absent from what is read, so acquisition archives them like any gap.
            if e.next_offset >= plog.log_end_offset:
                return None
            return self._acquire(sp, plog, member_id, e.next_offset, max_bytes, max_records, now_ms)
        acquired = sp.acquire(
            member_id,
            [BatchSpan(s.base_offset, s.last_offset, s.is_control) for s in spans],
            max_records=max_records,
            now_ms=now_ms,
        )
        self._after(sp, now_ms)
        if not acquired:
            return None
        self.metrics.records_acquired.inc(sum(a.last_offset - a.first_offset + 1 for a in acquired))
        # Trim to the batches that hold acquired records; the client drops the rest anyway.
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        kept = [s for s in spans if s.last_offset >= first and s.base_offset <= last]
        start, end = kept[0].position_in_result, kept[-1].position_in_result + kept[-1].size
        return FetchedPartition(ErrorCode.none, data[start:end], acquired)

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Sequence[AckBatch],
        now_ms: int,
    ) -> ErrorCode:
        """Plan, write, apply: an acknowledgement the client is told failed has not happened."""
        try:
            sp = self.get(group_id, topic_id, partition, now_ms)
        except StorageError as e:  # a new share-partition's first checkpoint was not written
            return e.error_code
        if sp is None:
            return ErrorCode.unknown_topic_or_partition
        plan = sp.plan_acknowledge(member_id, batches)
        code = plan if isinstance(plan, ErrorCode) else self._commit(sp, plan, now_ms)
        self.metrics.share_acks.labels(result="ok" if code == ErrorCode.none else "failed").inc()
        if code == ErrorCode.none:
            counts = count_ack_types(batches)
            for ack_type, n in counts.items():
                if ack_type in ACK_TYPE_NAMES:
                    self.metrics.record_acks.labels(ackType=ACK_TYPE_NAMES[ack_type]).inc(n)
            self._after(sp, now_ms, rejected=counts.get(REJECT, 0))
        return code

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> int:
        """A member left or timed out: everything it holds becomes available at once."""
        released = 0
        for sp in self.partitions_of(group_id):
            plan = sp.plan_member_release(member_id)
            if plan.runs and self._commit(sp, plan, now_ms) == ErrorCode.none:
                released += plan.records
                self._after(sp, now_ms)
        if released:
            log.info(
                "released records of departed member",
                group=group_id,
                member=member_id,
                records=released,
            )
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Run the acquisition-lock timer: expire every share-partition with a lock due."""
        expired = 0
        for key in self._timer.pop_due(now_ms):
            sp = self._partitions.get(key)
            if sp is None:
                continue
            plan = sp.plan_expiry(now_ms)
            if self._commit(sp, plan, now_ms) != ErrorCode.none:
                self._timer.schedule(key, now_ms + RETRY_WRITE_MS)  # the disk may have room then
                continue
            if plan.records:
                expired += plan.records
                self.metrics.lock_timeouts.inc(plan.records)
                log.info(
                    "acquisition locks expired",
                    group=key[0],
                    topic_id=str(key[1]),
                    partition=key[2],
                    records=plan.records,
                )
            self._after(sp, now_ms)
        return expired

    def _commit(self, sp: SharePartition, plan: Plan, now_ms: int) -> ErrorCode:
        """Write the plan's durable ranges, then apply it; if the write fails, drop it."""
        if self._state_dir is not None:
            try:
                self.persister.write(sp, plan.changes, now_ms)
            except StorageError as e:
                self.metrics.share_state_write_failures.inc()
                log.warning(
                    "share state not written; the change is not applied",
                    group=sp.group_id, topic_id=str(sp.topic_id), partition=sp.partition,
                    error=str(e),
                )  # fmt: skip
                return e.error_code
        sp.apply(plan, now_ms=now_ms)
        return ErrorCode.none

    def _after(self, sp: SharePartition, now_ms: int, rejected: int = 0) -> None:
        """Bookkeeping after any change: re-arm the timer, count archivals, wake fetchers."""
        deadline = sp.next_deadline()
        if deadline is not None:
            self._timer.schedule((sp.group_id, sp.topic_id, sp.partition), deadline)
        changes = sp.take_changes()  # already durable: written before they were applied
        # Records archived by this operation other than by REJECT reached the delivery limit.
        archived = (
            sum(c.last_offset - c.first_offset + 1 for c in changes if c.state is ARCHIVED)
            - rejected
        )
        if archived > 0:
            self.metrics.archived_at_limit.inc(archived)
            log.info(
                "records archived at the delivery-count limit",
                group=sp.group_id,
                topic_id=str(sp.topic_id),
                partition=sp.partition,
                records=archived,
            )
        if changes and sp.next_fetch_offset() is not None and sp.next_fetch_offset() != sp.speo:
            topic = self._logs.topic_by_id(sp.topic_id)
            if topic is not None:
                self._on_available(topic.name, sp.partition)

    # admin (share-group offsets) -----------------------------------------------------------

    @property
    def state_dir(self) -> Path | None:
        """Where share snapshot files live (None: share state is not durable)."""
        return self._state_dir

    def drop(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Forget one share-partition (in memory); the next `get` recovers it from its log."""
        sp = self._partitions.pop((group_id, topic_id, partition), None)
        if sp is not None:
            self.persister.forget(sp)
