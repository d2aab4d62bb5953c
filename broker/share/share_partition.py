"""SharePartition: one (group, topic, partition) of a share group: plan, apply, restore.

Sans-IO: synchronous, no clock of its own (every method that needs time takes `now_ms`), no
storage. It holds the window (`window.py`: the in-flight ranges and the one place their state
changes) and the group's limits, and it does four things:

- acquire: a ShareFetch's records, by the policy the group and the request call for
  (`broker/share/acquire/`: whole batches, a record limit, or key order);
- plan: what an acknowledgement, a lock expiry, a departure, a dead-letter copy or a moved
  log start would change (`plans.py`), without changing it;
- apply: the plan (`plan_apply.py`), once the manager has written its durable ranges (as Kafka:
  memory is never ahead of what recovery can rebuild);
- restore: the window from durable state after a restart, or reset by an admin.

The records given up on, waiting for their dead-letter copy, are `archiving.py`'s (KIP-1191).
Cost per fetch or acknowledgement is O(ranges touched + log batches), never O(records).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from broker.share.ack_runs import AckBatch
from broker.share.ack_runs import MalformedAcks
from broker.share.ack_runs import Run
from broker.share.ack_runs import ack_runs
from broker.share.acquire.batch_optimized import BATCH_OPTIMIZED
from broker.share.acquire.key_ordered import KeyOrdered
from broker.share.acquire.policy import AcquisitionPolicy
from broker.share.acquire.policy import Fetch
from broker.share.acquire.policy import KeyHashes
from broker.share.acquire.record_limit import RECORD_LIMIT
from broker.share.acquire.scheduled import Scheduled
from broker.share.archiving import Archiving
from broker.share.in_flight import InFlightBatch
from broker.share.limits import ShareLimits
from broker.share.plan_apply import apply_runs
from broker.share.plans import Outcome
from broker.share.plans import Plan
from broker.share.plans import PlanDraft
from broker.share.plans import StartPlan
from broker.share.plans import due_runs
from broker.share.plans import held_by
from broker.share.plans import holders
from broker.share.plans import member_runs
from broker.share.plans import plan_into
from broker.share.plans import plan_log_start
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ReadCommitted
from broker.share.window import ShareWindow
from broker.share.window import StateRange

SharePartitionKey = tuple[str, uuid.UUID, int]
"""(group id, topic id, partition)."""


class SharePartition:
    """In-flight records of one share-partition: acquisition, acknowledgement, lock expiry."""

    def __init__(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        *,
        start_offset: int,
        limits: Callable[[], ShareLimits],
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.partition = partition
        self.key: SharePartitionKey = (group_id, topic_id, partition)  # read often: made once
        self._limits = limits
        self._window = ShareWindow(start_offset)
        self._key_order = KeyOrdered(start_offset)  # state for key-ordered groups only
        self._archiving = Archiving(self._window)  # given up on: dead letters (KIP-1191)
        self._schedule = Scheduled(start_offset)  # state for topics with scheduled delivery

    # ----------------------------------------------------------------------------- queries

    def limits(self) -> ShareLimits:
        """The group's limits in force now."""
        return self._limits()

    @property
    def spso(self) -> int:
        return self._window.start

    @property
    def speo(self) -> int:
        return self._window.end

    @property
    def key_ordering(self) -> bool:
        """Whether the group orders records by key (the broker then reads keys for it)."""
        return self._limits().key_ordering

    @property
    def read_committed(self) -> bool:
        """Whether the group reads committed records only (share.isolation.level)."""
        return self._limits().read_committed

    def in_flight_count(self) -> int:
        return self.speo - self.spso

    def holds_back_fetchers(self) -> bool:
        """Whether a fetch may find records past SPEO and acquire none (the record-lock
        limit reached, or key order): else an append's notification is all a waiter needs."""
        limits = self._limits()
        return self.speo - self.spso >= limits.max_record_locks or limits.key_ordering

    def acquired_count(self) -> int:
        return self._window.acquired

    def open_records(self) -> int:
        """Records of the window not yet ACKNOWLEDGED or ARCHIVED."""
        return self._window.open_records

    def range_count(self) -> int:
        """Number of internal ranges (equals the number of distinct runs: ranges merge)."""
        return len(self._window)

    def in_flight(self) -> list[InFlightBatch]:
        """A copy of the internal ranges, for describe APIs and tests."""
        return [
            InFlightBatch(b.first, b.last, b.state, b.delivery_count, b.member_id, b.deadline)
            for b in self._window
        ]

    def next_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED record, for the broker-wide timer."""
        return self._window.next_deadline()

    def next_wait(self, now_ms: int) -> int | None:
        """When the earliest record that waits (retry backoff, schedule) may be acquired."""
        return self._window.next_wait(now_ms)

    def delayed_count(self, now_ms: int) -> int:
        """AVAILABLE records that may not be acquired yet (lag's "delayed")."""
        return self._window.waiting(now_ms)

    def next_fetch_offset(self, now_ms: int | None = None) -> int | None:
        """Where the broker should read the log from; None when the window is full. With
        `now_ms`, records that wait past it are passed over."""
        first = self._window.first_available(now_ms)
        if first is not None:
            return first
        if self.speo - self.spso >= self._limits().max_record_locks:
            return None
        return self.speo

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count) of one offset. Below SPSO everything counts as ARCHIVED
        (its count is forgotten); from SPEO on everything is AVAILABLE, never delivered."""
        return self._window.state_of(offset)

    def state_ranges(self) -> list[StateRange]:
        """The whole window in durable form, adjacent equal ranges merged (a checkpoint)."""
        return self._window.state_ranges()

    def take_changes(self) -> list[StateRange]:
        """Durable-form ranges changed since the last call (later changes win), then clear.

        Only changes that a restart could not rebuild are listed: acquisition and RENEW leave
        the durable form as it was (ACQUIRED is stored as AVAILABLE with count - 1), and
        control batches and log gaps are archived again from the log on the next fetch.
        """
        return self._window.take_changes()

    # ------------------------------------------------------------------------- acquisition

    def acquire(
        self,
        member_id: str,
        spans: Sequence[BatchSpan],
        *,
        max_records: int,
        now_ms: int,
        keys: KeyHashes | None = None,
        record_limit: bool = False,
        committed: ReadCommitted | None = None,
        deliver_at: Mapping[int, int] | None = None,
    ) -> list[AcquiredRecords]:
        """Acquire records for `member_id` from the log batches `spans`, which start at the
        batch holding `next_fetch_offset()` and run in log order: the AVAILABLE in-flight
        records they hold, then new records while the window stays within
        `max_record_locks`. Control batches and offsets missing from the log are archived,
        never handed out.

        The policy: key order with `keys` (a key-ordered group: the key of every record the
        spans hold), else record_limit mode when the group or the request asks for it
        (ShareFetch v2's ShareAcquireMode, KIP-1206), else whole batches. With `committed`
        (read_committed), nothing at or past the LSO is taken and aborted transactions' batches
        are archived; with `deliver_at` (scheduled delivery: the times of the records that
        wait, from `schedule_from()` on), records join the window waiting until their time.
        """
        # Records that wait are passed over by the cursor, except in key order, where a
        # waiting record still holds its key's later ones back and so must be seen.
        cursor = self.next_fetch_offset(None if keys is not None else now_ms)
        if cursor is None or max_records <= 0:
            return []
        limits = self._limits()
        policy: AcquisitionPolicy = BATCH_OPTIMIZED
        if keys is not None:
            policy = self._key_order
        elif limits.record_limit or record_limit:
            policy = RECORD_LIMIT
        deadline = now_ms + limits.lock_duration_ms
        fetch = Fetch(
            member_id, spans, cursor, max_records, now_ms, deadline, limits.max_record_locks, keys,
            committed, deliver_at, limits.per_key,
        )  # fmt: skip
        if deliver_at is not None:
            return self._schedule.acquire(self._window, fetch, policy)
        return policy.acquire(self._window, fetch)

    def schedule_from(self, now_ms: int) -> int:
        """For a fetch of a topic with scheduled delivery: the offset from which it needs the
        records' delivery times (what this window has placed already is not read again)."""
        cursor = self.next_fetch_offset(None if self.key_ordering else now_ms)
        return self._schedule.times_from(cursor if cursor is not None else self.speo)

    def keys_wanted(self) -> tuple[int, int]:
        """For the next key-ordered fetch: the keys it needs from `lo` on (the start of the
        fetch, or past the keys remembered if they reach it), and the spans it may take,
        those starting below `hi` (where the window may grow to). The first span always does.
        """
        start = self.next_fetch_offset()
        if start is None:
            return (0, 0)
        hi = max(self.spso + self._limits().max_record_locks, self.speo)
        return self._key_order.keys_wanted(start, hi)

    def forget_member(self, member_id: str) -> None:
        """The member left the group: its hash range goes to the others at once."""
        self._key_order.forget_member(member_id)

    def pass_non_data(self, first: int, last: int) -> None:
        """The log holds no data record at [first, last] (a control or an empty batch):
        archived if available, as a fetch's read archives it. Recovery does not record
        these, so a recovered window learns them from the log's ranges instead."""
        self._window.archive_absent(first, last)

    def pass_own_record(self, offset: int) -> bool:
        """The one-record control batch this share-partition's state was just written as, at
        `offset`: when the window is empty and ends there, SPSO and SPEO move past it now, as
        the next fetch's read would move them (control offsets are never delivered; recovery
        passes it the same way). A consumer at the log end that acknowledges all it holds then
        does not read the log, nor wake fetchers, once per acknowledgement for nothing."""
        if not offset == self.spso == self.speo:
            return False
        self._window.archive_absent(offset, offset)
        return True

    # ------------------------------------------------------------------------------- plans

    def plan_acknowledge(
        self, member_id: str, batches: Sequence[AckBatch], now_ms: int = 0
    ) -> Plan | ErrorCode:
        """Check acknowledgement batches and plan them: all of them, or none with an error.

        INVALID_REQUEST: unknown type, first > last, unsorted or overlapping batches, or a
        types list that is neither one type nor one per offset. INVALID_RECORD_STATE: a non-GAP
        offset outside the window, not ACQUIRED, or acquired by another member; or RENEW while
        renewal is disabled. A GAP offset is never an error: it is archived if this member
        holds it, else left alone (a gap between log batches is archived on acquisition).
        """
        try:
            runs = list(ack_runs(batches))
        except MalformedAcks:
            return ErrorCode.invalid_request
        draft = self.draft(member_id, now_ms)
        refused = self.plan_more(draft, runs)
        return refused if refused is not None else draft.plan()

    def sole_hold(self, member_id: str, first: int, last: int) -> InFlightBatch | None:
        """The range of the common ACCEPT of [first, last], or None (`ShareWindow`'s)."""
        return self._window.sole_hold(member_id, first, last)

    def accept_sole(self, b: InFlightBatch) -> None:
        """Apply that ACCEPT (its change written first): what `apply` of its plan does."""
        self._window.accept_sole(b)

    def draft(self, member_id: str | None, now_ms: int = 0) -> PlanDraft:
        """An empty plan for `member_id`'s acknowledgement at `now_ms` (when released records
        start their retry backoff), under the limits in force now."""
        return PlanDraft(member_id, self._limits(), now_ms=now_ms)

    def plan_more(self, draft: PlanDraft, runs: Sequence[Run]) -> ErrorCode | None:
        """Check the next runs of an acknowledgement (sorted, disjoint, after the draft's) and
        add what they change to `draft`; or the error that refuses the whole request (see
        `plan_acknowledge`). Nothing changes: a draft planned over several steps stays right
        as long as nothing else moves the member's records in between (the manager sees to
        it: `SharePartitionManager.begin_acknowledge`)."""
        member_id, limits = draft.member_id, draft.limits
        assert member_id is not None, "an acknowledgement has a member"
        for first, last, ack in runs:
            if ack is AcknowledgeType.GAP:
                continue
            if ack is AcknowledgeType.RENEW and not limits.renew_enabled:
                return ErrorCode.invalid_record_state
            if not held_by(self._window, member_id, first, last):
                return ErrorCode.invalid_record_state
        plan_into(self._window, draft, runs)
        return None

    def hand_over(self, member_id: str, owner: str, runs: Sequence[Run]) -> ErrorCode | None:
        """Stage `runs` in a transaction: every record must be ACQUIRED by `member_id`
        (else INVALID_RECORD_STATE, nothing moves); they pass to `owner` with no lock
        deadline, until the transaction's marker acknowledges them (`txn_acks.py`)."""
        if not all(held_by(self._window, member_id, first, last) for first, last, _ in runs):
            return ErrorCode.invalid_record_state
        for first, last, _ in runs:
            self._window.hand_over(first, last, owner)
        return None

    def plan_expiry(self, now_ms: int) -> Plan:
        """Release every record whose lock deadline is <= now (planned, not applied)."""
        return self._plan(due_runs(self._window, now_ms), now_ms)

    def plan_member_release(self, member_id: str, now_ms: int = 0) -> Plan:
        """Release every record `member_id` holds (it left or timed out)."""
        return self._plan(member_runs(self._window, member_id), now_ms)

    def _plan(self, runs: Sequence[Run], now_ms: int) -> Plan:
        draft = PlanDraft(None, self._limits(), now_ms=now_ms)
        plan_into(self._window, draft, runs)
        return draft.plan()

    def holders(self, runs: Sequence[Run]) -> list[str]:
        """The members holding acquired records in `runs`, before the plan is applied (for log
        lines: who was too slow). O(ranges touched)."""
        return holders(self._window, runs)

    # ------------------------------------------------------------------------------- apply

    def apply(self, plan: Plan, *, now_ms: int) -> Outcome:
        """Apply a plan made by one of the `plan_*` methods, with no change in between; what
        moved and why."""
        self.apply_runs(plan, 0, len(plan.runs), now_ms=now_ms)
        return plan.outcome

    def apply_runs(self, plan: Plan, start: int, stop: int, *, now_ms: int) -> None:
        """Apply `plan.runs[start:stop]`: a plan applied over several steps (`plan_apply.py`)."""
        apply_runs(self._window, self._archiving, plan, start, stop, now_ms)

    def settle(self, plan: Plan) -> Outcome:
        """The last step of applying a plan: what it moved, and why."""
        self._window.advance_start()
        return plan.outcome

    @property
    def archiving(self) -> Archiving:
        """The records given up on, until their dead-letter copies (KIP-1191)."""
        return self._archiving

    # ------------------------------------------------------------------ the log start moves

    def plan_log_start(self, log_start: int) -> StartPlan:
        """The window once every record below `log_start` is archived and SPSO is at least
        `log_start` (KIP-932: the log start moved past SPSO). Nothing changes yet; at or
        below SPSO the window stays as it is."""
        return plan_log_start(self._window, log_start)

    def apply_log_start(self, plan: StartPlan) -> None:
        """Apply a `plan_log_start` plan, made with no change in between, once it is durable."""
        self._window.archive_below(plan.log_start)

    # ----------------------------------------------------------------- reset and recovery

    def reset(self, start_offset: int) -> None:
        """Drop all in-flight state and start the window at `start_offset` (admin reset of an
        empty group). Pending changes are dropped: the caller must write a new checkpoint."""
        self._window.clear(start_offset)
        self._archiving.clear()
        self._key_order.reset(start_offset)
        self._schedule.reset(start_offset)

    def restore(self, spso: int, speo: int, ranges: Sequence[StateRange]) -> None:
        """Rebuild the window from durable state (a checkpoint and its deltas, applied).

        Offsets of [spso, speo) that no range covers are AVAILABLE with delivery count 0: at
        most a first delivery was under way there, and that is what its durable form says.
        Ranges below `spso` are ignored (SPSO moved past them); a range past `speo` moves
        SPEO up to it, as a SHARE_DELTA moves the recorded end in seed 000. Overlapping
        ranges and ACQUIRED (never durable) are a ValueError.
        """
        if speo < spso:
            raise ValueError(f"SPEO {speo} is below SPSO {spso}")
        self.reset(spso)
        self._window.restore(spso, speo, ranges)
