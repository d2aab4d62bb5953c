"""Acknowledgement batches of ShareFetch and ShareAcknowledge, applied per partition.

A topic may be listed twice in one request (librdkafka does it): batches are merged per
partition, never overwritten. Each partition's batches apply atomically.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from broker.share.record_state import AcknowledgeType
from broker.share.share_partition import AckBatch
from broker.share.share_partition_manager import SharePartitionManager

TopicIdPartition = tuple[uuid.UUID, int]
RENEW = int(AcknowledgeType.RENEW)


def collect(topics: Iterable[Any]) -> dict[TopicIdPartition, list[AckBatch]]:
    """(topic id, partition) -> its acknowledgement batches, over every listing of the topic."""
    acks: dict[TopicIdPartition, list[AckBatch]] = {}
    for topic in topics:
        for p in topic.partitions:
            batches = p.acknowledgement_batches
            if batches:
                acks.setdefault((topic.topic_id, p.partition_index), []).extend(
                    (b.first_offset, b.last_offset, b.acknowledge_types) for b in batches
                )
    return acks


def apply(
    manager: SharePartitionManager,
    group_id: str,
    member_id: str,
    acks: dict[TopicIdPartition, list[AckBatch]],
    *,
    renew_allowed: bool,
    now_ms: int,
) -> dict[TopicIdPartition, ErrorCode]:
    """Apply every partition's batches; RENEW before v2 is an invalid request (KIP-1222)."""
    results: dict[TopicIdPartition, ErrorCode] = {}
    for (topic_id, partition), batches in acks.items():
        batches.sort(key=lambda b: b[0])
        if not renew_allowed and any(RENEW in b[2] for b in batches):
            results[(topic_id, partition)] = ErrorCode.invalid_request
            continue
        results[(topic_id, partition)] = manager.acknowledge(
            group_id, member_id, topic_id, partition, batches, now_ms
        )
    return results
