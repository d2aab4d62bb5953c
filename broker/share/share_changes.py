"""Every change of loaded share-partitions' records that must survive a restart:
acknowledgements (in one go, or in steps as an `AckJob`), lock expiry and departures.

Each is planned (`SharePartition.plan_*`), written through the Persister, and only then
applied; a failed write drops the plan, so an acknowledgement the client is told failed has
not happened and memory is never ahead of the log. While an acknowledgement goes on in steps,
nothing else changes its share-partition's records or writes its state: lock expiry is
re-armed and departures are released once it is done, and the dead-letter duty waits (`busy`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Sequence

import structlog
from kio.schema.errors import ErrorCode

from broker.share.ack_job import AckJob
from broker.share.ack_runs import AckBatch
from broker.share.ack_runs import Run
from broker.share.acquisition_lock_timer import AcquisitionLockTimer
from broker.share.bookkeeping import Bookkeeping
from broker.share.in_flight import InFlightBatch
from broker.share.persister import Persister
from broker.share.persister import ShareChange
from broker.share.persister import change_of
from broker.share.persister import window_after
from broker.share.plans import Outcome
from broker.share.plans import Plan
from broker.share.record_state import AcknowledgeType
from broker.share.share_logs import ShareLogs
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.window import ACKNOWLEDGED
from broker.share.window import StateRange
from storage.errors import StorageError

log = structlog.get_logger("shoal.share")

ACCEPT = int(AcknowledgeType.ACCEPT)
# False: every acknowledgement is planned (the tests comparing the two paths set it).
ACCEPT_SOLE = True
RETRY_WRITE_MS = 1000  # a lock expiry whose share-state write failed is tried again after this


def count_ack_types(runs: Iterable[Run]) -> dict[AcknowledgeType, int]:
    """Records per acknowledge type of a request's runs."""
    counts: dict[AcknowledgeType, int] = {}
    for first, last, ack in runs:
        counts[ack] = counts.get(ack, 0) + last - first + 1
    return counts


class ShareChanges:
    """Plan, write, apply, bookkeep: the manager's changes of its share-partitions' records."""

    def __init__(
        self,
        partitions: dict[SharePartitionKey, SharePartition],
        logs: ShareLogs,
        persister: Persister,
        metrics: ShareMetrics,
        timer: AcquisitionLockTimer[SharePartitionKey],
        book: Bookkeeping,
    ) -> None:
        self._partitions = partitions  # the manager's registry, shared
        self._logs = logs
        self._persister = persister
        self._metrics = metrics
        self._timer = timer
        self._book = book
        # Acknowledgements in progress (stepped by their callers), and the departures of
        # members from those share-partitions, released once the acknowledgement is done.
        self._jobs: dict[SharePartitionKey, AckJob] = {}
        self._deferred_releases: dict[SharePartitionKey, set[str]] = {}

    def busy(self, key: SharePartitionKey) -> bool:
        """Whether an acknowledgement in progress holds the share-partition's state."""
        return key in self._jobs

    def abandon(self, gone: Callable[[SharePartitionKey], bool], outcome: ErrorCode) -> None:
        """Stop the acknowledgements of share-partitions that are `gone` (topic or group)."""
        for key in [k for k in self._jobs if gone(k)]:
            self._jobs[key].abandon(outcome)

    # ------------------------------------------------------------------- acknowledgements

    def acknowledge(
        self, key: SharePartitionKey, member_id: str, batches: Sequence[AckBatch], now_ms: int
    ) -> ErrorCode:
        """Plan, write, apply, in one go: an acknowledgement the client is told failed has
        not happened. For requests small enough to do in one step (`ack_job.STEP_RUNS`
        runs: nearly every one, so this is the hot path), and for tools and tests; a bigger
        one goes in steps (`begin_acknowledge`)."""
        sp = self._partitions.get(key)
        if sp is None:  # nothing held there: checked as a job (rare)
            job = self.begin_acknowledge(key, member_id, batches, now_ms)
            return job if isinstance(job, ErrorCode) else job.run_to_end()
        return self.acknowledge_in(sp, member_id, batches, now_ms)

    def acknowledge_in(
        self, sp: SharePartition, member_id: str, batches: Sequence[AckBatch], now_ms: int
    ) -> ErrorCode:
        """`acknowledge` on a loaded share-partition, in one go."""
        if self._jobs:
            self.finish_acknowledgement(sp.key)
        # Only a window that held fetchers back has waiters for the room an ack makes.
        spso = sp.spso if sp.holds_back_fetchers() else None
        # The common case: one range, all ACCEPT, exactly what the member holds from SPSO.
        if ACCEPT_SOLE and len(batches) == 1:
            first, last, types = batches[0]
            if len(types) == 1 and types[0] == ACCEPT:
                held = sp.sole_hold(member_id, first, last)
                if held is not None:
                    return self._accept_sole(sp, held, member_id, now_ms, spso)
        plan = sp.plan_acknowledge(member_id, batches, now_ms)
        result = plan if isinstance(plan, ErrorCode) else self.commit(sp, plan, now_ms)
        if isinstance(result, ErrorCode):
            self._metrics.on_acknowledgement(False, {})
            return result
        assert isinstance(plan, Plan)
        self._metrics.on_acknowledgement(True, count_ack_types(plan.runs))
        self._book.after(sp, now_ms, result, [member_id], spso_before=spso)
        return ErrorCode.none

    def _accept_sole(
        self, sp: SharePartition, b: InFlightBatch, member_id: str, now_ms: int, spso: int | None
    ) -> ErrorCode:
        """`acknowledge_in` of an ACCEPT of exactly the one range of the window, which the
        member holds (`SharePartition.sole_hold`): the plan the general path would make
        (one change, the range ACKNOWLEDGED, emptying the window) written and applied with
        no planning, then the same metrics and bookkeeping. Held to the general path by
        `tests/unit/test_share_accept_sole.py`."""
        changes = (StateRange(b.first, b.last, ACKNOWLEDGED, b.delivery_count, 0),)
        change = ShareChange(changes, sp.speo, True, lambda: window_after(sp, changes))
        written = self._write(sp, change, now_ms)
        if isinstance(written, ErrorCode):
            self._metrics.on_acknowledgement(False, {})
            return written
        records = b.last - b.first + 1
        sp.accept_sole(b)
        if written is not None:
            sp.pass_own_record(written)
        self._metrics.on_acknowledgement(True, {AcknowledgeType.ACCEPT: records})
        # No outcome: an ACCEPT rejects nothing and reaches no delivery limit.
        self._book.after(sp, now_ms, None, [member_id], spso_before=spso)
        return ErrorCode.none

    def begin_acknowledge(
        self,
        key: SharePartitionKey,
        member_id: str,
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
        if self._jobs:
            self.finish_acknowledgement(key)
        sp = self._partitions.get(key)
        if sp is None:
            topic = self._logs.topic_by_id(key[1])
            if topic is None or not 0 <= key[2] < topic.partitions:
                return ErrorCode.unknown_topic_or_partition
        job = AckJob(
            key, sp, member_id, batches, renew_allowed=renew_allowed, now_ms=now_ms,
            write=self.write, on_pending=self._pending, on_done=self._acknowledged,
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
                self._book.after(
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
            self._book.after(
                sp, job.now_ms, job.plan.outcome, [job.member_id], spso_before=job.spso_before,
                changed=bool(job.plan.changes),
            )  # fmt: skip
        else:  # lock expiry skipped it meanwhile
            self._book.after(sp, job.now_ms)
        for member_id in sorted(self._deferred_releases.pop(job.key, ())):
            released = self._release(sp, member_id, job.now_ms)
            if released:
                self._metrics.on_member_released(released)

    # ---------------------------------------------------------- departures and lock expiry

    def release_member(
        self, group_id: str, partitions: Sequence[SharePartition], member_id: str, now_ms: int
    ) -> int:
        """A member left or timed out: everything it holds in `partitions` (its group's)
        becomes available at once (or once the acknowledgement in progress there is done)."""
        released = 0
        for sp in partitions:
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
        plan = sp.plan_member_release(member_id, now_ms)
        if not plan.runs:
            return 0
        outcome = self.commit(sp, plan, now_ms)
        if isinstance(outcome, ErrorCode):
            return 0
        self._book.after(sp, now_ms, outcome, [member_id])
        return plan.records

    def expire_locks(self, now_ms: int) -> int:
        """Run the acquisition-lock timer: expire every share-partition with a lock due (one
        with an acknowledgement in progress is re-armed when that is done); and wake the
        fetchers of share-partitions whose waiting records may now be acquired."""
        for key in self._book.due_wakes(now_ms):
            sp = self._partitions.get(key)
            if sp is not None:
                self._book.wake(sp, now_ms)
        expired = 0
        for key in self._timer.pop_due(now_ms):
            sp = self._partitions.get(key)
            if sp is None or key in self._jobs:
                continue
            plan = sp.plan_expiry(now_ms)
            holders = sp.holders(plan.runs)  # before the plan clears them
            outcome = self.commit(sp, plan, now_ms)
            if isinstance(outcome, ErrorCode):
                self._timer.schedule(key, now_ms + RETRY_WRITE_MS)  # the disk may have room then
                continue
            if plan.records:
                expired += plan.records
                self._metrics.on_lock_timeouts(plan.records)
                log.info(
                    "acquisition locks expired",
                    group=key[0],
                    topic=self._book.topic_name(key[1]),
                    topic_id=str(key[1]),
                    partition=key[2],
                    records=plan.records,
                    members=holders,
                )
            self._book.after(sp, now_ms, outcome, holders)
        return expired

    # ------------------------------------------------------------------- write, then apply

    def commit(self, sp: SharePartition, plan: Plan, now_ms: int) -> Outcome | ErrorCode:
        """Write the plan's durable ranges, then apply it; if the write fails, drop it."""
        written = self.write(sp, plan, now_ms)
        if isinstance(written, ErrorCode):
            return written
        outcome = sp.apply(plan, now_ms=now_ms)
        if written is not None:
            sp.pass_own_record(written)
        return outcome

    def write(self, sp: SharePartition, plan: Plan, now_ms: int) -> int | ErrorCode | None:
        """Write the plan's durable ranges: the offset written (None: nothing to write), or
        the error that drops the plan."""
        return self._write(sp, change_of(sp, plan.changes), now_ms)

    def _write(
        self, sp: SharePartition, change: ShareChange, now_ms: int
    ) -> int | ErrorCode | None:
        try:
            return self._persister.write(sp.key, change, now_ms)
        except StorageError as e:
            self._metrics.on_share_state_write_failure()
            log.warning(
                "share state not written; the change is not applied",
                group=sp.group_id, topic_id=str(sp.topic_id), partition=sp.partition,
                error=str(e),
            )  # fmt: skip
            return e.error_code
