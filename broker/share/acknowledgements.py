"""Acknowledgement batches of ShareFetch and ShareAcknowledge, checked and applied per partition.

A topic may be listed twice in one request (librdkafka does it): batches are merged per
partition, never overwritten. Each partition's batches apply atomically.

A partition's batches are bounded before anything is built from them: `MAX_ACK_ENTRIES` counts
one per single-type batch and one per offset of a per-offset type list. A legal request never
comes near it (librdkafka sends at most max.poll.records = 500 merged ranges per partition, and
every acknowledged offset must be held in a window of at most
`group.share.max.partition.max.record.locks` records), while planning and applying that many
runs (two-phase: the durable change is computed, written, then applied) costs ~25 ms, so one
partition's atomic step stays inside the loop's ~50 ms budget. Callers yield to the
event loop between partitions (see `broker.slicing`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.share.record_state import AcknowledgeType
from broker.share.share_partition import AckBatch
from broker.share.share_partition_manager import SharePartitionManager

TopicIdPartition = tuple[uuid.UUID, int]
RENEW = int(AcknowledgeType.RENEW)
MAX_ACK_ENTRIES = 2_000


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


def prepare(
    listed: Sequence[Sequence[AckBatchLike]], *, renew_allowed: bool
) -> list[AckBatch] | AckOutcome:
    """One partition's batches (every listing of it), sorted; or why they are refused.

    RENEW before v2 is an invalid request (KIP-1222), and so is a partition over the cap.
    """
    entries = sum(len(batches) for batches in listed)
    if entries <= MAX_ACK_ENTRIES:
        entries = sum(len(b.acknowledge_types) for batches in listed for b in batches)
    if entries > MAX_ACK_ENTRIES:
        return AckOutcome(
            ErrorCode.invalid_request,
            f"more than {MAX_ACK_ENTRIES} acknowledgement ranges and per-offset types "
            "for one partition",
        )
    out: list[AckBatch] = [
        (b.first_offset, b.last_offset, b.acknowledge_types) for batches in listed for b in batches
    ]
    out.sort(key=lambda b: b[0])
    if not renew_allowed and any(RENEW in b[2] for b in out):
        return AckOutcome(ErrorCode.invalid_request, "RENEW needs version 2")
    return out


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
    """Check and apply one partition's batches, all or none."""
    batches = prepare(listed, renew_allowed=renew_allowed)
    if isinstance(batches, AckOutcome):
        return batches
    code = manager.acknowledge(group_id, member_id, key[0], key[1], batches, now_ms)
    return OK if code == ErrorCode.none else AckOutcome(code)
