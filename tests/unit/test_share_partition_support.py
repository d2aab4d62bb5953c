"""Builders shared by the SharePartition tests: a fake log of batch headers and mutable limits.

Named test_* only to stay among the share-partition test files; it holds no tests.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.share.ack_runs import AckBatch
from broker.share.limits import ShareLimits
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_state_persister import ShareStatePersister
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from storage.log import PartitionLog
from storage.memory_log import MemoryLogs

TOPIC_ID = uuid.UUID(int=7)


def persister_over(
    plog: PartitionLog,
    topic_id: uuid.UUID = TOPIC_ID,
    state_dir: Path | None = None,
    *,
    max_deltas: int = 100,
) -> ShareStatePersister:
    """A ShareStatePersister over one topic ("t") whose single partition's log is `plog`."""
    logs = MemoryLogs()
    logs.create_topic("t", topic_id=topic_id, logs=[plog])
    return ShareStatePersister(logs, state_dir, max_deltas=max_deltas)


@dataclass
class Limits:
    """Group limits an operator may change at any moment; pass `limits.get` to the partition."""

    current: ShareLimits = field(
        default_factory=lambda: ShareLimits(
            delivery_count_limit=5,
            max_record_locks=2000,
            lock_duration_ms=30_000,
            renew_enabled=True,
        )
    )

    def get(self) -> ShareLimits:
        return self.current

    def set(
        self,
        *,
        delivery_count_limit: int | None = None,
        max_record_locks: int | None = None,
        lock_duration_ms: int | None = None,
        renew_enabled: bool | None = None,
        record_limit: bool | None = None,
        key_ordering: bool | None = None,
        dead_letter: bool | None = None,
    ) -> None:
        c = self.current
        self.current = ShareLimits(
            delivery_count_limit=c.delivery_count_limit
            if delivery_count_limit is None
            else delivery_count_limit,
            max_record_locks=c.max_record_locks if max_record_locks is None else max_record_locks,
            lock_duration_ms=c.lock_duration_ms if lock_duration_ms is None else lock_duration_ms,
            renew_enabled=c.renew_enabled if renew_enabled is None else renew_enabled,
            record_limit=c.record_limit if record_limit is None else record_limit,
            key_ordering=c.key_ordering if key_ordering is None else key_ordering,
            dead_letter=c.dead_letter if dead_letter is None else dead_letter,
        )


@dataclass
class FakeLog:
    """Batch headers of a partition log, as the broker's storage would report them."""

    spans: list[BatchSpan] = field(default_factory=list)
    end: int = 0

    def append(self, count: int, *, control: bool = False, skip: int = 0) -> BatchSpan:
        """Append a batch of `count` offsets, after `skip` offsets missing from the log."""
        base = self.end + skip
        span = BatchSpan(base, base + count - 1, control)
        self.spans.append(span)
        self.end = span.last_offset + 1
        return span

    def read_from(self, offset: int) -> list[BatchSpan]:
        """The batch holding `offset` (or the next one) and everything after it."""
        i = bisect_right([s.last_offset for s in self.spans], offset - 1)
        return self.spans[i:]


class OnePhase(SharePartition):
    """A SharePartition whose changes are planned and applied at once, with no durable write
    in between: the one-phase calls the tests and tools use (the broker writes first)."""

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], *, now_ms: int) -> ErrorCode:
        """Plan and apply an acknowledgement; its error if refused."""
        plan = self.plan_acknowledge(member_id, batches)
        if isinstance(plan, ErrorCode):
            return plan
        self.apply(plan, now_ms=now_ms)
        return ErrorCode.none

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose lock deadline is <= now; return how many."""
        plan = self.plan_expiry(now_ms)
        self.apply(plan, now_ms=now_ms)
        return plan.records

    def release_member(self, member_id: str, now_ms: int) -> int:
        """Release every record `member_id` holds (it left or timed out); return how many."""
        plan = self.plan_member_release(member_id)
        self.apply(plan, now_ms=now_ms)
        return plan.records


def make_partition(limits: Limits, start_offset: int = 0) -> OnePhase:
    return OnePhase("G1", TOPIC_ID, 0, start_offset=start_offset, limits=limits.get)


def fetch(
    sp: SharePartition, log: FakeLog, member: str, *, now: int, max_records: int = 500
) -> list[AcquiredRecords]:
    """What the broker does for one partition of a ShareFetch."""
    offset = sp.next_fetch_offset()
    if offset is None:
        return []
    return sp.acquire(member, log.read_from(offset), max_records=max_records, now_ms=now)


AVAILABLE = RecordState.AVAILABLE
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED


@dataclass
class Rec:
    state: RecordState
    count: int
    owner: str | None = None
    deadline: int | None = None

    def key(self) -> tuple[RecordState, int, str | None, int | None]:
        return self.state, self.count, self.owner, self.deadline


class WindowModel:
    """The window of a per-offset reference model (SPSO, SPEO and each record's state), as
    the SharePartition models of test_share_partition_state_machine and _key_order keep it."""

    def __init__(self, limits: Limits, start: int) -> None:
        self.limits = limits
        self.spso = self.speo = start
        self.recs: dict[int, Rec] = {}

    def next_fetch_offset(self) -> int | None:
        for o in range(self.spso, self.speo):
            if self.recs[o].state is AVAILABLE:
                return o
        full = self.speo - self.spso >= self.limits.current.max_record_locks
        return None if full else self.speo

    def advance(self) -> None:
        while self.spso < self.speo and self.recs[self.spso].state in (ACKNOWLEDGED, ARCHIVED):
            del self.recs[self.spso]
            self.spso += 1

    def archive_absent(self, first: int, last: int) -> None:
        for o in range(max(first, self.spso), last + 1):
            if o >= self.speo:
                self.recs[o] = Rec(ARCHIVED, 0)
                self.speo = o + 1
            elif self.recs[o].state is AVAILABLE:
                self.recs[o] = Rec(ARCHIVED, self.recs[o].count)
        self.advance()
