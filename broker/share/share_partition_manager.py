"""SharePartitionManager: the share-partition leaders of this broker.

Owns every SharePartition, the broker-wide acquisition-lock timer, and the path from a
ShareFetch to log bytes: ask the SharePartition where to read, read stored batches once (with
their header spans), acquire ranges over those spans, and return the bytes of the batches that
hold acquired records, unchanged. Records are never decoded.

What it needs from the rest of the broker comes in as protocols: the logs (`ShareLogs`), the
durable share state (`Persister`, written before every change is applied) and the counters
(`ShareMetrics`). Each change reports why records moved (`Outcome`); nothing is inferred.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from kio.schema.errors import ErrorCode

from broker.share.ack_job import AckJob
from broker.share.acquisition_lock_timer import AcquisitionLockTimer
from broker.share.dead_letter import Target
from broker.share.dead_letter import dead_letters
from broker.share.dead_letter import resolve
from broker.share.key_hashes import key_hashes
from broker.share.persister import NoPersister
from broker.share.persister import Persister
from broker.share.persister import load
from broker.share.record_state import AcknowledgeType
from broker.share.share_logs import ShareLogs
from broker.share.share_metrics import NO_METRICS
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import AckBatch
from broker.share.share_partition import AcquiredRecords
from broker.share.share_partition import BatchSpan
from broker.share.share_partition import Moved
from broker.share.share_partition import Outcome
from broker.share.share_partition import Plan
from broker.share.share_partition import Run
from broker.share.share_partition import ShareLimits
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.share_partition import StateRange
from coordinator.group_configs import DLQ_TOPIC
from coordinator.group_configs import GroupConfigs
from protocol.dead_letter import build_dead_letter_batch
from protocol.record_batch import InvalidRecordBatch
from storage.errors import InvalidRecord
from storage.errors import KafkaStorageError
from storage.errors import OffsetOutOfRange
from storage.errors import StorageError
from storage.log import PartitionLog

log = structlog.get_logger("shoal.share")

# One ShareFetch reads at most this much of a partition's log: MaxBytes is 50 MiB from
# librdkafka while MaxRecords is 500, and reading 50 MiB to hand out 500 records is waste.
# A first batch above it is still read whole when the partition's budget allows it (or it is
# the one batch KIP-74 lets through whatever its size).
READ_CHUNK_BYTES = 1024 * 1024
MAX_READS_PER_FETCH = 8
RETRY_WRITE_MS = 1000  # a lock expiry whose share-state write failed is tried again after this
# One dead-letter pass copies at most this many records: it runs on the event loop, and 500
# copies with their keys and values take about 30 ms (pointers alone, about 10 ms).
DEAD_LETTER_BUDGET = 500


def _covered(runs: Sequence[StateRange], copied: Sequence[StateRange]) -> bool:
    """Whether every offset of `runs` lies in one of the `copied` runs."""
    return all(
        any(c.first_offset <= r.first_offset and r.last_offset <= c.last_offset for c in copied)
        for r in runs
    )


def count_ack_types(runs: Iterable[Run]) -> dict[AcknowledgeType, int]:
    """Records per acknowledge type of a request's runs."""
    counts: dict[AcknowledgeType, int] = {}
    for first, last, ack in runs:
        counts[ack] = counts.get(ack, 0) + last - first + 1
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
            record_limit=configs.effective(group_id, "share.acquire.mode") == "record_limit",
            key_ordering=configs.effective(group_id, "share.key.ordering.enable"),
            dead_letter=bool(configs.effective(group_id, DLQ_TOPIC)),
        )
        cached[:] = [(configs.version, value)]
        return value

    return limits


class SharePartitionManager:
    def __init__(
        self,
        logs: ShareLogs,
        configs: GroupConfigs,
        on_available: Callable[[str, int], None] = lambda topic, partition: None,
        *,
        persister: Persister | None = None,
        metrics: ShareMetrics = NO_METRICS,
        dead_letter_prefix: Callable[[], str] = lambda: "dlq.",
    ) -> None:
        self._logs = logs
        self._configs = configs
        self._on_available = on_available  # wakes long polls when records come back
        # None: share state is not durable (group.share.persister.class.name empty, unit tests)
        self._persister: Persister = persister if persister is not None else NoPersister()
        self._metrics = metrics
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._timer: AcquisitionLockTimer[SharePartitionKey] = AcquisitionLockTimer()
        # KIP-1191: share-partitions that may hold ARCHIVING records, and what was logged.
        self._dead_letter_prefix = dead_letter_prefix
        self._dead_letter_pending: set[SharePartitionKey] = set()
        self._dead_letter_problems: dict[str, str] = {}  # group -> the problem last logged
        # Runs copied by a pass whose archiving was not written: not copied again.
        self._dead_letters_copied: dict[SharePartitionKey, list[StateRange]] = {}
        # Acknowledgements in progress (stepped by their callers), and the departures of
        # members from those share-partitions, released once the acknowledgement is done.
        self._jobs: dict[SharePartitionKey, AckJob] = {}
        self._deferred_releases: dict[SharePartitionKey, set[str]] = {}

    @property
    def persister(self) -> Persister:
        return self._persister

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        """A deleted topic takes its share-partitions and share state with it."""
        for key in [k for k in self._jobs if k[1] == topic_id]:
            self._jobs[key].abandon(ErrorCode.unknown_topic_or_partition)
        for key in [k for k in self._partitions if k[1] == topic_id]:
            del self._partitions[key]
        self._persister.forget_topic(topic, topic_id)

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
        started = time.perf_counter()  # a duration, not a point in time: not the clock's now
        if load(self._persister, sp, plog.log_start_offset, now_ms):
            # Control offsets in the recovered window are not data (a fetch would pass them):
            # passed now, so its open records and lag are right before anyone fetches.
            for first, last in plog.non_data_ranges(sp.spso, sp.speo):
                sp.pass_non_data(first, last)
        self._metrics.on_partition_loaded(time.perf_counter() - started)
        self._partitions[key] = sp
        if sp.dead_letter_count():  # copies a crash left unfinished are made again
            self._dead_letter_pending.add(key)
        return sp

    def load_recorded(self, now_ms: Callable[[], int]) -> Iterator[None]:
        """Load every share-partition with recorded state, yielding between them (and between
        slices of a header walk its log may need): their lag is known from the start, before
        any member comes back. One that cannot be read is logged and left for its first fetch.
        Said in one line."""
        started, loaded = time.monotonic(), 0
        for group_id, topic_id, partition in self._persister.recorded():
            topic = self._logs.topic_by_id(topic_id)
            if topic is not None:
                yield from self._opened(topic.name, partition)
            plog = self._logs.log(topic.name, partition) if topic else None
            if (group_id, topic_id, partition) in self._partitions or plog is None:
                continue
            yield from plog.learn_non_data()
            try:
                self.get(group_id, topic_id, partition, now_ms())
                loaded += 1
            except StorageError as e:
                log.warning("share-partition not loaded at start", group=group_id,
                            topic_id=str(topic_id), partition=partition, error=str(e))  # fmt: skip
            yield
        if loaded:
            log.info("share-partitions loaded", partitions=loaded,
                     seconds=round(time.monotonic() - started, 3))  # fmt: skip

    def _opened(self, topic: str, partition: int) -> Iterator[None]:
        """The partition's log opened, a slice at a time if it is being recovered at the start
        (else `log` would check it in one go); one that cannot be opened is left to `log`."""
        with contextlib.suppress(KafkaStorageError):
            while not self._logs.open_slice(topic, partition):
                yield

    def all_partitions(self) -> list[SharePartition]:
        return list(self._partitions.values())

    def partitions_of(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in self._partitions.items() if g == group_id]

    def drop_group(self, group_id: str) -> None:
        for key in [k for k in self._jobs if k[0] == group_id]:
            self._jobs[key].abandon(ErrorCode.group_id_not_found)
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]

    def lock_duration_ms(self, group_id: str) -> int:
        value: int = self._configs.effective(group_id, "share.record.lock.duration.ms")
        return value

    # fetch and acknowledge ---------------------------------------------------------------------

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
            if sp is not None and sp.next_fetch_offset() is not None:
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
        """Acquire from one share-partition: records from batches read within `max_bytes`,
        the first batch whole even above it up to `first_batch_max` (None: whatever its size,
        KIP-74's one batch that lets a consumer progress)."""
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
            fetched = self._acquire(
                sp, plog, member_id, offset, (max_bytes, first_batch_max), max_records, now_ms,
                record_limit,
            )  # fmt: skip
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
        budget: tuple[int, int | None],
        max_records: int,
        now_ms: int,
        record_limit: bool = False,
    ) -> FetchedPartition | None:
        """Read once from `offset` within `budget` (max bytes, first batch's max: see `fetch`)
        and acquire what the read holds; None if nothing."""
        # Enough batches for max_records new records past whatever is in flight after `offset`.
        wanted = max_records + max(0, sp.speo - offset)
        start = max(offset, plog.log_start_offset)
        max_bytes, first_batch_max = budget
        try:
            data, spans = plog.read_with_spans(
                start, min(max_bytes, READ_CHUNK_BYTES), wanted, first_batch_max
            )
        except OffsetOutOfRange:
            return None
        keys = None
        if sp.key_ordering:  # records are decoded for key-ordered groups only
            lo, hi = sp.keys_wanted()
            spans = [s for s in spans if s.base_offset < hi]  # beyond, the window cannot grow
            keys = key_hashes(data, [s for s in spans if s.last_offset >= lo])
        acquired = sp.acquire(
            member_id,
            # An empty batch (offsets the cleaner removed, or storage's stand-in for damaged
            # ones, already logged and counted) is archived like a control batch.
            [
                BatchSpan(s.base_offset, s.last_offset, s.is_control or not s.has_records)
                for s in spans
            ],
            max_records=max_records,
            now_ms=now_ms,
            keys=keys,
            record_limit=record_limit,
        )
        self._after(sp, now_ms)
        if not acquired:
            return None
        self._metrics.on_records_acquired(sum(a.last_offset - a.first_offset + 1 for a in acquired))
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
        """Plan, write, apply, in one go: an acknowledgement the client is told failed has
        not happened. For requests small enough to do in one step (`ack_job.STEP_RUNS`
        runs: nearly every one, so this is the hot path), and for tools and tests; a bigger
        one goes in steps (`begin_acknowledge`)."""
        sp = self._partitions.get((group_id, topic_id, partition))
        if sp is None:  # nothing held there: checked as a job (rare)
            job = self.begin_acknowledge(group_id, member_id, topic_id, partition, batches, now_ms)
            return job if isinstance(job, ErrorCode) else job.run_to_end()
        return self.acknowledge_in(sp, member_id, batches, now_ms)

    def acknowledge_in(
        self, sp: SharePartition, member_id: str, batches: Sequence[AckBatch], now_ms: int
    ) -> ErrorCode:
        """`acknowledge` on a loaded share-partition (`loaded`)."""
        if self._jobs:
            self.finish_acknowledgement(sp.key)
        # Only a window that held fetchers back has waiters for the room an ack makes.
        spso = sp.spso if sp.holds_back_fetchers() else None
        plan = sp.plan_acknowledge(member_id, batches)
        result = plan if isinstance(plan, ErrorCode) else self._commit(sp, plan, now_ms)
        if isinstance(result, ErrorCode):
            self._metrics.on_acknowledgement(False, {})
            return result
        assert isinstance(plan, Plan)
        self._metrics.on_acknowledgement(True, count_ack_types(plan.runs))
        self._after(sp, now_ms, result, [member_id], spso_before=spso)
        return ErrorCode.none

    def loaded(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition if it is loaded (else nobody holds any of its records)."""
        return self._partitions.get((group_id, topic_id, partition))

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
        """Start one member's acknowledgement of a share-partition: plan, write, apply, in
        steps (`AckJob.step`) the caller takes until it is done. An acknowledgement the client
        is told failed has not happened.

        Until it is done nothing else changes the share-partition's records or writes its
        share state: lock expiry, dead-letter copies and the release of departed members wait
        for it, and admin changes (and another acknowledgement begun meanwhile) finish it at
        once first. Callers that step jobs across loop iterations queue acknowledgements of
        one share-partition (`broker.ack_slices`), so a second one never has to.

        A share-partition that is not loaded holds no acquired record (acquisitions do not
        survive a restart), so an acknowledgement never creates one: a member's closing
        acknowledgement that lands after DeleteShareGroupOffsets must not bring it back."""
        key = (group_id, topic_id, partition)
        if self._jobs:
            self.finish_acknowledgement(key)
        sp = self._partitions.get(key)
        if sp is None:
            topic = self._logs.topic_by_id(topic_id)
            if topic is None or not 0 <= partition < topic.partitions:
                return ErrorCode.unknown_topic_or_partition
        job = AckJob(
            key, sp, member_id, batches, renew_allowed=renew_allowed, now_ms=now_ms,
            write=self._write, on_pending=self._pending, on_done=self._acknowledged,
        )  # fmt: skip
        if sp is not None and sp.holds_back_fetchers():
            # Only a window that held fetchers back has waiters for the room an ack makes.
            job.spso_before = sp.spso
        return job

    def finish_acknowledgement(self, key: SharePartitionKey) -> None:
        """Step the acknowledgement in progress on `key`, if any, to its end now: for the
        rare change that cannot wait (admin operations; a synchronous caller)."""
        job = self._jobs.get(key)
        if job is not None:
            job.run_to_end()

    def _pending(self, job: AckJob) -> None:
        """A job goes on after its first step: from now its share-partition waits for it (a
        job done in one step, nearly every one, is never seen here)."""
        self._jobs[job.key] = job

    def _acknowledged(self, job: AckJob) -> None:
        """An acknowledgement is done: count it, and do the bookkeeping of its change and of
        the changes it held back (lock expiry re-armed, departed members released)."""
        ok = job.outcome == ErrorCode.none
        self._metrics.on_acknowledgement(ok, job.counts if ok else {})
        if not job.pending:  # done in its first step: nothing was held back
            if ok and job.sp is not None and job.plan is not None:
                self._after(
                    job.sp, job.now_ms, job.plan.outcome, [job.member_id],
                    spso_before=job.spso_before,
                )  # fmt: skip
            return
        self._jobs.pop(job.key, None)
        # A job begun where nothing was loaded may end with the share-partition loaded (by a
        # fetch meanwhile), its lock expiry and departures held back all the same.
        sp = job.sp or self._partitions.get(job.key)
        if sp is None:
            self._deferred_releases.pop(job.key, None)
            return
        if ok and job.plan is not None:
            self._after(
                sp, job.now_ms, job.plan.outcome, [job.member_id], spso_before=job.spso_before,
                changed=bool(job.plan.changes),
            )  # fmt: skip
        else:  # lock expiry skipped it meanwhile
            self._after(sp, job.now_ms)
        for member_id in sorted(self._deferred_releases.pop(job.key, ())):
            released = self._release(sp, member_id, job.now_ms)
            if released:
                self._metrics.on_member_released(released)

    def release_member(self, group_id: str, member_id: str, now_ms: int) -> int:
        """A member left or timed out: everything it holds becomes available at once (or
        once the acknowledgement in progress on a share-partition is done)."""
        released = 0
        for sp in self.partitions_of(group_id):
            sp.forget_member(member_id)
            if self._jobs and sp.key in self._jobs:
                self._deferred_releases.setdefault(sp.key, set()).add(member_id)
                continue
            released += self._release(sp, member_id, now_ms)
        if released:
            self._metrics.on_member_released(released)
            log.info(
                "released records of departed member",
                group=group_id,
                member=member_id,
                records=released,
            )
        return released

    def _release(self, sp: SharePartition, member_id: str, now_ms: int) -> int:
        """Release what `member_id` holds in `sp`; how many records (0 if not written)."""
        plan = sp.plan_member_release(member_id)
        if not plan.runs:
            return 0
        outcome = self._commit(sp, plan, now_ms)
        if isinstance(outcome, ErrorCode):
            return 0
        self._after(sp, now_ms, outcome, [member_id])
        return plan.records

    def expire_locks(self, now_ms: int) -> int:
        """Run the acquisition-lock timer: expire every share-partition with a lock due (one
        with an acknowledgement in progress is re-armed when that is done)."""
        expired = 0
        for key in self._timer.pop_due(now_ms):
            sp = self._partitions.get(key)
            if sp is None or key in self._jobs:
                continue
            plan = sp.plan_expiry(now_ms)
            holders = sp.holders(plan.runs)  # before the plan clears them
            outcome = self._commit(sp, plan, now_ms)
            if isinstance(outcome, ErrorCode):
                self._timer.schedule(key, now_ms + RETRY_WRITE_MS)  # the disk may have room then
                continue
            if plan.records:
                expired += plan.records
                self._metrics.on_lock_timeouts(plan.records)
                log.info(
                    "acquisition locks expired",
                    group=key[0],
                    topic=self._topic_name(key[1]),
                    topic_id=str(key[1]),
                    partition=key[2],
                    records=plan.records,
                    members=holders,
                )
            self._after(sp, now_ms, outcome, holders)
        return expired

    def _commit(self, sp: SharePartition, plan: Plan, now_ms: int) -> Outcome | ErrorCode:
        """Write the plan's durable ranges, then apply it; if the write fails, drop it."""
        written = self._write(sp, plan, now_ms)
        if isinstance(written, ErrorCode):
            return written
        outcome = sp.apply(plan, now_ms=now_ms)
        if written is not None:
            sp.pass_own_record(written)
        return outcome

    def _write(self, sp: SharePartition, plan: Plan, now_ms: int) -> int | ErrorCode | None:
        """Write the plan's durable ranges: the offset written (None: nothing to write), or
        the error that drops the plan."""
        try:
            return self._persister.write(sp, plan.changes, now_ms)
        except StorageError as e:
            self._metrics.on_share_state_write_failure()
            log.warning(
                "share state not written; the change is not applied",
                group=sp.group_id, topic_id=str(sp.topic_id), partition=sp.partition,
                error=str(e),
            )  # fmt: skip
            return e.error_code

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._logs.topic_by_id(topic_id)
        return topic.name if topic is not None else None

    def _after(
        self,
        sp: SharePartition,
        now_ms: int,
        outcome: Outcome | None = None,
        members: Sequence[str] = (),
        *,
        spso_before: int | None = None,
        changed: bool | None = None,
    ) -> None:
        """Bookkeeping after any change: re-arm the timer, count archivals, wake fetchers.
        `changed`: whether the change moved records, when the partition's pending changes
        cannot tell (a fetch between the steps of an acknowledgement takes them)."""
        deadline = sp.next_deadline()
        if deadline is not None:
            self._timer.schedule(sp.key, deadline)
        taken = sp.take_changes()  # already durable: written before they were applied
        moved = bool(taken) or bool(changed)
        if outcome and (outcome[Moved.REJECTED] or outcome[Moved.DELIVERY_LIMIT]):
            self._dead_letter_pending.add(sp.key)  # ARCHIVING if the group has a DLQ topic
        archived = outcome[Moved.DELIVERY_LIMIT] if outcome else 0
        if outcome and archived:
            self._given_up(sp, outcome, archived, members)
        offset = sp.next_fetch_offset() if moved else None
        if offset is not None:
            topic = self._logs.topic_by_id(sp.topic_id)
            plog = self._logs.log(topic.name, sp.partition) if topic else None
            # Records came back, or SPSO moved and the window may take records already in the
            # log (fetchers that found it full, or every key of theirs held, wait on this;
            # `spso_before` is None when the window held nobody back: with room in it, every
            # record in the log was offered to the waiters when it was appended).
            grew = spso_before is not None and sp.spso > spso_before
            if topic is not None and (
                offset != sp.speo or (grew and plog is not None and offset < plog.log_end_offset)
            ):
                self._on_available(topic.name, sp.partition)

    def _given_up(
        self, sp: SharePartition, outcome: Outcome, records: int, members: Sequence[str]
    ) -> None:
        """Records given up on at the delivery-count limit: one log line naming them (by
        offset ranges) and the group, and the counters. With a dead-letter topic they are
        ARCHIVING now, ARCHIVED once copied (logged by the copy if it fails)."""
        topic = self._topic_name(sp.topic_id)
        self._metrics.on_delivery_limit_archived(sp.group_id, topic or str(sp.topic_id), records)
        first, last = outcome.at_limit[0][0], outcome.at_limit[-1][1]
        log.warning(
            "records archived at the delivery-count limit",
            group=sp.group_id,
            topic=topic,
            topic_id=str(sp.topic_id),
            partition=sp.partition,
            records=records,
            offsets=offset_ranges(outcome.at_limit),
            first_offset=first,
            last_offset=last,
            dead_letter=sp.limits().dead_letter,
            members=list(members),  # who held them last
        )

    # dead letters (KIP-1191) --------------------------------------------------------------

    def copy_dead_letters(self, now_ms: int, budget: int = DEAD_LETTER_BUDGET) -> int:
        """Copy ARCHIVING records to their group's dead-letter topic, then archive them: the
        copy is appended first, the SHARE_DELTA that archives them after, so a crash in
        between copies them again on recovery (a duplicate, never a loss). Without a usable
        dead-letter topic they are archived as without one, and the problem logged once.
        Runs as a broker duty, off the fetch path. Records copied or archived."""
        done = 0
        for key in sorted(self._dead_letter_pending):
            if done >= budget:
                break
            if key in self._jobs:  # its share state is being written: next pass
                continue
            sp = self._partitions.get(key)
            runs = sp.dead_letters(budget - done) if sp is not None else []
            if sp is None or not runs:
                self._dead_letter_pending.discard(key)
                continue
            done += self._copy_and_archive(sp, runs, now_ms)
        return done

    def _copy_and_archive(self, sp: SharePartition, runs: list[StateRange], now_ms: int) -> int:
        """One share-partition's part of a pass; how many records it archived."""
        copied = self._copy(sp, runs, now_ms)
        if copied is None:
            return 0  # the disk refused: the records stay ARCHIVING, tried next pass
        changes = sp.plan_archive(runs)
        try:
            self._persister.write(sp, changes, now_ms)
        except StorageError as e:
            # Kept ARCHIVING and noted as copied: the next pass writes the archiving again
            # without another copy (a restart before then copies them once more).
            if copied:
                self._dead_letters_copied[sp.key] = runs
            self._metrics.on_share_state_write_failure()
            self._dead_letter_problem(
                sp.group_id,
                f"share state of {sp.group_id} on partition {sp.partition} not written: {e}",
                "dead letters not archived yet; tried again",
            )
            return 0
        self._dead_letters_copied.pop(sp.key, None)
        if copied:
            self._dead_letter_problems.pop(sp.group_id, None)  # a later problem is logged
        archived = sp.apply_archive(changes)
        self._metrics.on_dead_letters(archived, copied=copied)
        self._after(sp, now_ms)
        return archived

    def _copy(self, sp: SharePartition, runs: list[StateRange], now_ms: int) -> bool | None:
        """Copy `runs` to the group's dead-letter partition: True when the copies are there,
        False when they cannot be made (archive without them), None to try again later."""
        source = self._logs.topic_by_id(sp.topic_id)
        target = resolve(
            self._logs,
            self._configs,
            self._dead_letter_prefix(),
            sp.group_id,
            source.name if source else None,
            sp.partition,
        )
        if isinstance(target, str):
            self._dead_letter_problem(sp.group_id, target)
            return False
        if target is None:  # the group's dead-letter topic was unset meanwhile
            return False
        if _covered(runs, self._dead_letters_copied.get(sp.key, ())):
            return True  # copied on a pass whose archiving was not written
        return self._append_dead_letters(sp, target, runs, now_ms)

    def _append_dead_letters(
        self, sp: SharePartition, target: Target, runs: list[StateRange], now_ms: int
    ) -> bool | None:
        """Append the copies of `runs`: True when written, False when the topic refuses them
        (archive without a copy), None when the disk refused (try again)."""
        topic = self._logs.topic_by_id(sp.topic_id)
        source = self._logs.log(topic.name, sp.partition) if topic else None
        letters = dead_letters(
            runs,
            sp.dead_letter_reasons,
            sp.limits().delivery_count_limit,
            source if target.copy_record else None,
        )
        batch = build_dead_letter_batch(
            topic.name if topic else str(sp.topic_id),
            sp.partition,
            sp.group_id,
            letters,
            timestamp_ms=now_ms,
        )
        try:
            target.log.append(batch, now_ms=now_ms)
        except (InvalidRecord, InvalidRecordBatch) as e:  # e.g. compacted: copies need keys
            self._dead_letter_problem(
                sp.group_id, f"dead-letter topic {target.topic} refuses the copies: {e}"
            )
            return False
        except StorageError as e:
            self._dead_letter_problem(
                sp.group_id,
                f"dead-letter topic {target.topic} not written: {e}",
                "dead letters not copied yet; tried again",
            )
            return None
        self._on_available(target.topic, target.partition)  # wakes fetchers of the DLQ topic
        return True

    def _dead_letter_problem(
        self,
        group_id: str,
        problem: str,
        what: str = "records archived without a dead-letter copy",
    ) -> None:
        """Log `problem` once, until a copy of the group's records succeeds or it changes."""
        if self._dead_letter_problems.get(group_id) != problem:
            self._dead_letter_problems[group_id] = problem
            log.warning(what, problem=problem)

    def dead_letter_problem(self, group_id: str) -> str | None:
        """The last problem met copying the group's records, until a copy is archived."""
        return self._dead_letter_problems.get(group_id)

    # the log start moves (DeleteRecords) --------------------------------------------------------

    def move_log_start(
        self, topic_id: uuid.UUID, partition: int, log_start: int, now_ms: int
    ) -> int:
        """`move_start_of` for every share-partition of the partition (`share_partitions_on`),
        in one step; how many records were archived.

        :raises storage.errors.KafkaStorageError: a checkpoint was not written; that
            share-partition and those after it are unchanged (those before it stay moved).
        """
        keys = self.share_partitions_on(topic_id, partition)
        return sum(self.move_start_of(key, log_start, now_ms) for key in keys)

    def share_partitions_on(self, topic_id: uuid.UUID, partition: int) -> list[SharePartitionKey]:
        """The share-partitions of one partition: loaded, or with durable state."""
        keys = {k for k in self._partitions if k[1] == topic_id and k[2] == partition}
        for group_id in self._persister.groups():
            key = (group_id, topic_id, partition)
            if key not in keys and self._persister.has_state(key):
                keys.add(key)
        return sorted(keys)

    def move_start_of(self, key: SharePartitionKey, log_start: int, now_ms: int) -> int:
        """Before the partition's log start moves up to `log_start`: the share-partition (loaded,
        or recovered from its log first) archives its records below it, SPSO moves to it
        (KIP-932), and its window is written as a new checkpoint at the log end, so the records
        recovery needs lie above the new start. Plan, write, apply. How many records were
        archived; none if the share-partition was deleted meanwhile.

        :raises storage.errors.KafkaStorageError: the checkpoint was not written; nothing changed.
        """
        if not self.initialised(*key):  # its offsets were deleted: do not start it again
            return 0
        self.finish_acknowledgement(key)
        sp = self.get(*key, now_ms)
        if sp is None:
            return 0
        plan = sp.plan_log_start(log_start)
        self._persister.checkpoint(key, plan.start_offset, plan.end_offset, plan.ranges, now_ms)
        sp.apply_log_start(plan)
        self._after(sp, now_ms)
        log.info(
            "share-partition checkpointed above a new log start",
            group=key[0], topic_id=str(key[1]), partition=key[2],
            log_start=log_start, spso=sp.spso, archived=plan.archived,
        )  # fmt: skip
        return plan.archived

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
        self.finish_acknowledgement(key)
        topic = self._logs.topic_by_id(topic_id)
        plog = self._logs.log(topic.name, partition) if topic else None
        earliest = self._configs.effective(group_id, "share.auto.offset.reset") == "earliest"
        start = 0 if earliest or plog is None else plog.log_end_offset
        self._persister.delete(key, start, now_ms)
        self._partitions.pop(key, None)


MAX_LOGGED_RANGES = 100  # a log line names at most this many offset ranges


def offset_ranges(ranges: Sequence[tuple[int, int]], cap: int = MAX_LOGGED_RANGES) -> str:
    """`"3-5,9"`: offset ranges for a log line, the first `cap` of them, then how many more
    (first_offset and last_offset on the same line bound them all)."""
    shown = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:cap])
    more = len(ranges) - cap
    return f"{shown},... {more} more ranges" if more > 0 else shown
