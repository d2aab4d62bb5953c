"""Acknowledgement batches of ShareFetch and ShareAcknowledge, checked and started per partition.

A topic may be listed twice in one request (librdkafka does it): batches are merged per
partition, never overwritten; each listing must be in offset order, as Kafka's
`KafkaApis.validateAcknowledgementBatches` requires. Each partition's batches apply
atomically, in steps when they are many (`AckJob`: plan, write one SHARE_DELTA, apply).

Whatever a client can hold is applied, however many entries it takes: librdkafka acknowledging
5,000 records alternately ACCEPT/REJECT sends 5,000 ranges, and a single producer batch of
3,758 records is handed out whole by one ShareFetch in batch_optimized mode (as Kafka's
`SharePartition.acquire` does: the batch holding the MaxRecords-th record is taken whole).
Only what no client could send is refused before any work is done: every record a member
holds lies in the share-partition's in-flight window (SPSO to SPEO), and a partition's
entries (one per single-type batch, one per offset of a per-offset type list) are disjoint,
so more entries than the window has records must name offsets past its end. Kafka answers
such a batch INVALID_REQUEST ("The last offset in request is past acquired records",
`SharePartition.fetchSubMapForAcknowledgementBatch`), and so does this, at the cost of
counting the entries. The window itself is bounded by `share.partition.max.record.locks`
plus the one batch that may cross it, so the work a partition's acknowledgement can ask
for is bounded by what was handed out. A share-partition that is not loaded holds nothing:
its batches are checked in steps like any others (see `AckJob`).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from operator import itemgetter
from typing import Protocol

import structlog
from kio.schema.errors import ErrorCode

from broker.share.ack_job import STEP_RUNS
from broker.share.ack_job import AckJob
from broker.share.ack_runs import AckBatch
from broker.share.record_state import AcknowledgeType
from broker.share.share_partition_manager import SharePartitionManager

log = structlog.get_logger("shoal.share")

TopicIdPartition = tuple[uuid.UUID, int]
_FIELDS = attrgetter("first_offset", "last_offset", "acknowledge_types")
RENEW = int(AcknowledgeType.RENEW)


class AckBatchLike(Protocol):
    """An acknowledgement batch as every version of ShareFetch and ShareAcknowledge carries it."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class AckOutcome:
    """One partition's acknowledgement result, as the response reports it."""

    error_code: ErrorCode
    message: str | None = None


OK = AckOutcome(ErrorCode.none)


def past_window(
    in_flight: int | None, listed: Sequence[Sequence[AckBatchLike]]
) -> AckOutcome | None:
    """Why a partition's batches are refused before anything is built from them: more
    entries than the `in_flight` records of its window (None: not loaded, nothing to count
    against). Counted in O(listings), then O(batches) only when those fit the window."""
    if in_flight is None:
        return None
    entries = _entries(listed, in_flight)
    return _refusal(entries, in_flight) if entries > in_flight else None


def _refusal(entries: int, in_flight: int) -> AckOutcome:
    return AckOutcome(
        ErrorCode.invalid_request,
        f"{entries} acknowledgement entries for a share-partition with {in_flight} records "
        "in flight: offsets past the acquired records",
    )


def _entries(listed: Sequence[Sequence[AckBatchLike]], limit: int) -> int:
    """Entries of a partition's batches: counted in O(listings) when that already exceeds
    `limit`, else in O(batches)."""
    entries = sum(len(batches) for batches in listed)
    if entries <= limit:
        entries = sum(len(b.acknowledge_types) for batches in listed for b in batches)
    return entries


def merged(listed: Sequence[Sequence[AckBatchLike]]) -> Iterable[AckBatch]:
    """Every listing's batches as one stream in offset order, made as it is read (a listing
    out of order is left so, and refused as malformed)."""
    if len(listed) == 1:
        return map(_FIELDS, listed[0])
    return heapq.merge(*(map(_FIELDS, batches) for batches in listed), key=itemgetter(0))


def begin(
    manager: SharePartitionManager,
    group_id: str,
    member_id: str,
    key: TopicIdPartition,
    listed: Sequence[Sequence[AckBatchLike]],
    *,
    renew_allowed: bool,
    now_ms: int,
) -> AckJob | AckOutcome:
    """Check one partition's batches and apply them, or start applying them (a big request:
    the job is stepped to its end by the caller), or why they are refused. RENEW before v2 is
    an invalid request (KIP-1222)."""
    sp = manager.loaded(group_id, *key)
    entries = 0
    if sp is not None:
        in_flight = sp.speo - sp.spso  # every record a member holds lies there
        entries = _entries(listed, max(in_flight, STEP_RUNS))
        if entries > in_flight:
            refused = _refusal(entries, in_flight)
            log.info(
                "acknowledgement refused", reason=refused.message, group=group_id,
                member=member_id, topic_id=str(key[0]), partition=key[1],
            )  # fmt: skip
            return refused
    if sp is not None and entries <= STEP_RUNS:
        batches = list(merged(listed))  # one step's work: done now, as ever
        if not renew_allowed and any(RENEW in b[2] for b in batches):
            return AckOutcome(ErrorCode.invalid_request, "RENEW needs version 2")
        code = manager.acknowledge_in(sp, member_id, batches, now_ms)
        return OK if code == ErrorCode.none else AckOutcome(code)
    job = manager.begin_acknowledge(
        group_id, member_id, key[0], key[1], merged(listed), now_ms, renew_allowed=renew_allowed
    )
    return AckOutcome(job) if isinstance(job, ErrorCode) else job


def outcome(job: AckJob) -> AckOutcome:
    """What a finished job answers."""
    if job.outcome == ErrorCode.none:
        return OK
    assert job.outcome is not None, "the job is not done"
    return AckOutcome(job.outcome, job.message)


def apply(
    manager: SharePartitionManager,
    group_id: str,
    member_id: str,
    key: TopicIdPartition,
    listed: Sequence[Sequence[AckBatchLike]],
    *,
    renew_allowed: bool,
    now_ms: int,
) -> AckOutcome:
    """Check and apply one partition's batches, all or none, in one go (tools and tests)."""
    started = begin(
        manager, group_id, member_id, key, listed, renew_allowed=renew_allowed, now_ms=now_ms
    )
    if isinstance(started, AckOutcome):
        return started
    started.run_to_end()
    return outcome(started)
