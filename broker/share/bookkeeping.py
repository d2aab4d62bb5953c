"""What follows any change of a share-partition's records, once it is applied: the lock
timer re-armed, the wake-up timer armed for records that wait (retry backoff, schedules), the
dead-letter duty told, records given up on counted and logged, and fetchers woken when
records came back or the window made room, or when a wait ends (`wake_due`).

Each change says why records moved (`Outcome`); nothing here infers it from states.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence

import structlog

from broker.share.acquisition_lock_timer import AcquisitionLockTimer
from broker.share.dead_letter_duty import DeadLetters
from broker.share.plans import Moved
from broker.share.plans import Outcome
from broker.share.share_logs import ShareLogs
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey

log = structlog.get_logger("shoal.share")

MAX_LOGGED_RANGES = 100  # a log line names at most this many offset ranges


class Bookkeeping:
    """The manager's bookkeeping after a change (see the module docstring)."""

    def __init__(
        self,
        logs: ShareLogs,
        timer: AcquisitionLockTimer[SharePartitionKey],
        metrics: ShareMetrics,
        dead_letters: Callable[[], DeadLetters],
        on_available: Callable[[str, int], None],
    ) -> None:
        self._logs = logs
        self._timer = timer
        self._metrics = metrics
        self._dead_letters = dead_letters
        self._on_available = on_available  # wakes long polls when records come back
        # When each share-partition's earliest waiting record may be acquired: one entry per
        # partition, as the lock timer has, popped by the lock-expiry duty (`wake_due`).
        self._wakes: AcquisitionLockTimer[SharePartitionKey] = AcquisitionLockTimer()

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self._logs.topic_by_id(topic_id)
        return topic.name if topic is not None else None

    def after(
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
        self.arm_wake(sp, now_ms)
        taken = sp.take_changes()  # already durable: written before they were applied
        moved = bool(taken) or bool(changed)
        if outcome and (outcome[Moved.REJECTED] or outcome[Moved.DELIVERY_LIMIT]):
            self._dead_letters().note(sp.key)  # ARCHIVING if the group has a DLQ topic
        archived = outcome[Moved.DELIVERY_LIMIT] if outcome else 0
        if outcome and archived:
            self._given_up(sp, outcome, archived, members)
        offset = sp.next_fetch_offset(now_ms) if moved else None
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

    def arm_wake(self, sp: SharePartition, now_ms: int) -> None:
        """Schedule the wake-up for `sp`'s earliest waiting record (none: nothing to do)."""
        wait = sp.next_wait(now_ms)
        if wait is not None:
            self._wakes.schedule(sp.key, wait)
        else:
            self._wakes.cancel(sp.key)

    def due_wakes(self, now_ms: int) -> list[SharePartitionKey]:
        """The share-partitions whose earliest waiting records may be acquired by now."""
        return self._wakes.pop_due(now_ms)

    def wake(self, sp: SharePartition, now_ms: int) -> None:
        """Records of `sp` stopped waiting: fetchers parked on its partition try again, and
        the next wait is armed."""
        topic = self.topic_name(sp.topic_id)
        if topic is not None:
            self._on_available(topic, sp.partition)
        self.arm_wake(sp, now_ms)

    def _given_up(
        self, sp: SharePartition, outcome: Outcome, records: int, members: Sequence[str]
    ) -> None:
        """Records given up on at the delivery-count limit: one log line naming them (by
        offset ranges) and the group, and the counters. With a dead-letter topic they are
        ARCHIVING now, ARCHIVED once copied (logged by the copy if it fails)."""
        topic = self.topic_name(sp.topic_id)
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


def offset_ranges(ranges: Sequence[tuple[int, int]], cap: int = MAX_LOGGED_RANGES) -> str:
    """`"3-5,9"`: offset ranges for a log line, the first `cap` of them, then how many more
    (first_offset and last_offset on the same line bound them all)."""
    shown = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:cap])
    more = len(ranges) - cap
    return f"{shown},... {more} more ranges" if more > 0 else shown
