"""Shoal's own TxnShareAcknowledge (`protocol.shoal_apis`; no Kafka client sends it): a
transactional producer stages a share-group member's acknowledgements in its open transaction,
so they take effect if and only if the transaction commits (KIP-1289's draft, apache/kafka#22357).

The caller holds a transactional producer id and epoch (InitProducerId with its transactional
id) and a share consumer's member id and acquired ranges (`ShareConsumer.poll_acquired` in
explicit mode). Once staged, the records belong to the transaction: the member can no longer
acknowledge them, and neither its lock expiry nor its departure releases them.

Each share-partition's acknowledgements go to its leader (Metadata), as ShareAcknowledge's do:
one request per leader, sent together (with `shoal serve --processes N` the leaders may be
several; with one process every partition's leader is that process).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.types import TransactionalId
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64

from client.cluster import Cluster
from client.errors import KafkaError
from client.share_acks import AcknowledgeType
from protocol.shoal_apis import TxnShareAcknowledgementBatch
from protocol.shoal_apis import TxnShareAcknowledgePartition
from protocol.shoal_apis import TxnShareAcknowledgeRequest
from protocol.shoal_apis import TxnShareAcknowledgeResponse
from protocol.shoal_apis import TxnShareAcknowledgeTopic

TopicPartition = tuple[str, int]
AckRange = tuple[int, int, AcknowledgeType]  # first offset, last offset, type


class TxnShareAckError(Exception):
    """The whole request was refused (the transaction, the group or the broker)."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(f"TxnShareAcknowledge refused: {error_code.name}")
        self.error_code = error_code


async def txn_share_acknowledge(
    cluster: Cluster, transactional_id: str, producer_id: int, producer_epoch: int,
    group_id: str, member_id: str, acks: Mapping[TopicPartition, Sequence[AckRange]],
) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
    """Stage `acks` (sorted, disjoint ranges per partition) in the transaction, sent to each
    partition's leader; each partition's answer (NONE: staged; INVALID_RECORD_STATE: the member
    does not hold them).

    :raises TxnShareAckError: a leader refused its request whole (the first such refusal).
    """
    by_leader: dict[int | None, dict[TopicPartition, Sequence[AckRange]]] = {}
    for tp, ranges in acks.items():
        by_leader.setdefault(await _leader(cluster, *tp), {})[tp] = ranges
    if not by_leader:  # nothing to stage: one request still says whether the broker takes it
        by_leader[None] = {}
    args = (transactional_id, producer_id, producer_epoch, group_id, member_id)
    answers = await asyncio.gather(
        *(_send(cluster, leader, *args, part) for leader, part in by_leader.items())
    )
    merged: dict[TopicPartition, ErrorCode] = {}
    for answer in answers:
        merged.update(answer)
    return merged


async def _leader(cluster: Cluster, topic: str, partition: int) -> int | None:
    """The partition's leader; None (any node, which answers why) for one Metadata lacks."""
    try:
        info = await cluster.topic(topic)
    except KafkaError:
        return None
    p = info.partitions.get(partition)
    return p.leader_id if p is not None and p.leader_id >= 0 else None


async def _send(
    cluster: Cluster, leader: int | None, transactional_id: str, producer_id: int,
    producer_epoch: int, group_id: str, member_id: str,
    acks: Mapping[TopicPartition, Sequence[AckRange]],
) -> dict[TopicPartition, ErrorCode]:  # fmt: skip
    by_topic: dict[str, list[TxnShareAcknowledgePartition]] = {}
    for (topic, partition), ranges in acks.items():
        batches = tuple(
            TxnShareAcknowledgementBatch(
                first_offset=i64(first), last_offset=i64(last), acknowledge_types=(i8(int(t)),)
            )
            for first, last, t in ranges
        )
        by_topic.setdefault(topic, []).append(
            TxnShareAcknowledgePartition(
                partition_index=i32(partition), acknowledgement_batches=batches
            )
        )
    request = TxnShareAcknowledgeRequest(
        transactional_id=TransactionalId(transactional_id),
        producer_id=ProducerId(producer_id),
        producer_epoch=i16(producer_epoch),
        group_id=GroupId(group_id),
        member_id=member_id,
        topics=tuple(
            TxnShareAcknowledgeTopic(name=TopicName(t), partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )
    response: Any = await cluster.request(request, node_id=leader)
    assert isinstance(response, TxnShareAcknowledgeResponse)
    if response.error_code != ErrorCode.none:
        raise TxnShareAckError(ErrorCode(response.error_code))
    return {
        (str(t.name), int(p.partition_index)): ErrorCode(p.error_code)
        for t in response.topics
        for p in t.partitions
    }
