"""Client side of a share session (KIP-932) and the ShareFetch/ShareAcknowledge it sends.

One session per leader broker. Epoch 0 opens it and lists every partition; each later ShareFetch
or ShareAcknowledge uses the next epoch (one counter for both) and lists only the partitions
added since, with removed ones in ForgottenTopicsData.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from client.kio_apis import SHARE_ACKNOWLEDGE
from client.kio_apis import SHARE_FETCH
from client.share_acks import AckKey
from client.share_acks import AcknowledgeType
from client.share_acks import ack_batches
from protocol.messages import build

TopicPartitionId = tuple[uuid.UUID, int]
PartitionAcks = dict[AckKey, AcknowledgeType]

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
MAX_FETCH_BYTES = 50 * 1024 * 1024


@dataclass
class ShareSession:
    """What the leader's session holds, as far as this client knows."""

    node_id: int
    epoch: int = OPEN_EPOCH
    partitions: set[TopicPartitionId] = field(default_factory=set)

    @property
    def is_open(self) -> bool:
        return self.epoch != OPEN_EPOCH

    def take_epoch(self) -> int:
        """The epoch for the next request; the counter moves on (wrapping to 1 like Kafka)."""
        epoch = self.epoch
        self.epoch = 1 if epoch >= _MAX_EPOCH else epoch + 1
        return epoch

    def reset(self) -> None:
        """The broker lost or refused the session: the next request opens a new one."""
        self.epoch = OPEN_EPOCH
        self.partitions.clear()


@dataclass
class FetchPlan:
    """One ShareFetch to one leader: which partitions it lists, forgets and acknowledges."""

    session: ShareSession
    wanted: set[TopicPartitionId]
    acks: dict[TopicPartitionId, PartitionAcks]
    listed: set[TopicPartitionId] = field(default_factory=set)
    forgotten: set[TopicPartitionId] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.session.is_open:
            self.listed = (self.wanted - self.session.partitions) | set(self.acks)
            self.forgotten = self.session.partitions - self.wanted
        else:
            self.listed = set(self.wanted)

    @property
    def has_renew(self) -> bool:
        return any(AcknowledgeType.RENEW in a.values() for a in self.acks.values())

    def settle(self, epoch: int) -> None:
        """The broker took the request: its session now holds what the request said."""
        if epoch == OPEN_EPOCH:
            self.session.partitions = set(self.listed)
        else:
            self.session.partitions |= self.listed
            self.session.partitions -= self.forgotten


def _by_topic(keys: Iterable[TopicPartitionId]) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in sorted(keys):
        out.setdefault(topic_id, []).append(partition)
    return out


def _batches(m: Any, acks: PartitionAcks | None) -> tuple[Any, ...]:
    return tuple(
        build(m.AcknowledgementBatch, first_offset=f, last_offset=la, acknowledge_types=tuple(t))
        for f, la, t in ack_batches(acks or {})
    )


def share_fetch_request(
    version: int,
    group_id: str,
    member_id: str,
    epoch: int,
    plan: FetchPlan,
    *,
    max_wait_ms: int,
    max_records: int,
    renew: bool,
    record_limit: bool = False,
) -> Any:
    """ShareFetch; a renew request (KIP-1222) has MaxWait, MinBytes, MaxBytes, MaxRecords 0.
    `record_limit` (v2, KIP-1206's ShareAcquireMode 1): MaxRecords is a strict limit, the last
    acquired range may end inside a stored batch; v1 has no such mode (whole batches)."""
    m = SHARE_FETCH.requests(version)
    mode = {"share_acquire_mode": 1} if record_limit and version >= 2 else {}
    topics = tuple(
        build(
            m.FetchTopic,
            topic_id=topic_id,
            partitions=tuple(
                build(
                    m.FetchPartition,
                    partition_index=p,
                    acknowledgement_batches=_batches(m, plan.acks.get((topic_id, p))),
                )
                for p in partitions
            ),
        )
        for topic_id, partitions in _by_topic(plan.listed).items()
    )
    forgotten = tuple(
        build(m.ForgottenTopic, topic_id=topic_id, partitions=tuple(partitions))
        for topic_id, partitions in _by_topic(plan.forgotten).items()
    )
    return build(
        m.ShareFetchRequest,
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=0 if renew else max_wait_ms),
        min_bytes=0 if renew else 1,
        max_bytes=0 if renew else MAX_FETCH_BYTES,
        max_records=0 if renew else max_records,
        batch_size=max_records,
        is_renew_ack=renew and plan.has_renew,
        topics=topics,
        forgotten_topics_data=forgotten,
        **mode,
    )


def share_acknowledge_request(
    version: int,
    group_id: str,
    member_id: str,
    epoch: int,
    acks: Mapping[TopicPartitionId, PartitionAcks],
) -> Any:
    m = SHARE_ACKNOWLEDGE.requests(version)
    topics = tuple(
        build(
            m.AcknowledgeTopic,
            topic_id=topic_id,
            partitions=tuple(
                build(
                    m.AcknowledgePartition,
                    partition_index=p,
                    acknowledgement_batches=_batches(m, acks[(topic_id, p)]),
                )
                for p in partitions
            ),
        )
        for topic_id, partitions in _by_topic(acks).items()
    )
    renew = any(AcknowledgeType.RENEW in a.values() for a in acks.values())
    return build(
        m.ShareAcknowledgeRequest,
        group_id=group_id,
        member_id=member_id,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=topics,
    )
