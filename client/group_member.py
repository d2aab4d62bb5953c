"""A member of a consumer group by KIP-848's ConsumerGroupHeartbeat: join, keep the
assignment the coordinator gives, commit offsets as that member, leave.

The smallest member that behaves: it subscribes to topic names, owns what it is assigned
(reporting it back in each heartbeat, so a revoked partition is given up at once), and
commits with its member id and epoch, as Kafka's consumer does, so the group shows it as a
member and an admin reset is refused while it runs.
"""

from __future__ import annotations

import datetime
import uuid

from kio.schema.errors import ErrorCode

from client.cluster import Cluster
from client.errors import raise_for
from client.group_offsets import CommittedOffset
from client.group_offsets import alter_offsets
from client.group_offsets import list_offsets
from client.kio_apis import CONSUMER_GROUP_HEARTBEAT
from protocol import api_keys
from protocol.messages import build

TopicPartition = tuple[str, int]
_REBALANCE_TIMEOUT = datetime.timedelta(seconds=30)


class GroupMember:
    def __init__(self, cluster: Cluster, group_id: str, topics: list[str]) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topics = topics
        self.member_id = str(uuid.uuid4())  # v1: the member makes its id (KIP-848)
        self.epoch = 0
        self.assignment: set[TopicPartition] = set()
        self.interval_s = 5.0
        self._node: int | None = None

    async def _coordinator(self) -> int:
        if self._node is None:
            self._node = (await self.cluster.find_coordinator(self.group_id)).node_id
        return self._node

    async def heartbeat(self) -> set[TopicPartition]:
        """Join (epoch 0) or heartbeat; the assignment the coordinator gives now.

        :raises KafkaError: the coordinator refused (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH...).
        """
        version = self.cluster.version(api_keys.CONSUMER_GROUP_HEARTBEAT, 0, 1)
        m = CONSUMER_GROUP_HEARTBEAT.requests(version)
        owned = await self._owned(m)
        req = build(
            m.ConsumerGroupHeartbeatRequest,
            group_id=self.group_id,
            member_id=self.member_id if version >= 1 or self.epoch else "",
            member_epoch=self.epoch,
            rebalance_timeout=_REBALANCE_TIMEOUT,
            subscribed_topic_names=tuple(self.topics),
            topic_partitions=owned,
        )
        resp = await self.cluster.call(
            req, CONSUMER_GROUP_HEARTBEAT.response(version), node_id=await self._coordinator()
        )
        if resp.error_code == ErrorCode.not_coordinator:  # N changed: ask FindCoordinator again
            self._node = None
        raise_for(resp.error_code, resp.error_message or f"group {self.group_id}")
        self.member_id = resp.member_id or self.member_id
        self.epoch = int(resp.member_epoch)
        self.interval_s = resp.heartbeat_interval.total_seconds()
        if resp.assignment is not None:
            assigned: set[TopicPartition] = set()
            for tp in resp.assignment.topic_partitions:
                if tp.topic_id is None:  # not a topic (the field is non-null in Kafka's schema)
                    continue
                info = await self.cluster.topic_by_id(tp.topic_id)
                assigned.update((info.name, int(p)) for p in tp.partitions)
            self.assignment = assigned
        return self.assignment

    async def _owned(self, m: object) -> tuple[object, ...]:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(self.assignment):
            by_topic.setdefault(topic, []).append(p)
        out = []
        for topic, ps in by_topic.items():
            topic_id = (await self.cluster.topic(topic)).topic_id
            out.append(build(m.TopicPartitions, topic_id=topic_id, partitions=tuple(ps)))  # type: ignore[attr-defined]
        return tuple(out)

    async def committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets of `partitions` (those with one)."""
        found: dict[TopicPartition, CommittedOffset] = await list_offsets(
            self.cluster, await self._coordinator(), self.group_id, sorted(partitions)
        )
        return {tp: c.offset for tp, c in found.items() if c.offset >= 0}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit as this member (its id and epoch).

        :raises KafkaError: the first partition the coordinator refused.
        """
        if not offsets:
            return
        errors = await alter_offsets(
            self.cluster, await self._coordinator(), self.group_id, offsets,
            member_id=self.member_id, generation=self.epoch,
        )  # fmt: skip
        for error in errors.values():
            if error is not None:
                raise error

    async def leave(self) -> None:
        """Epoch -1: the coordinator drops the member and reassigns its partitions now."""
        version = self.cluster.version(api_keys.CONSUMER_GROUP_HEARTBEAT, 0, 1)
        m = CONSUMER_GROUP_HEARTBEAT.requests(version)
        req = build(
            m.ConsumerGroupHeartbeatRequest,
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=-1,
            rebalance_timeout=_REBALANCE_TIMEOUT,
            subscribed_topic_names=None,
            topic_partitions=None,
        )
        await self.cluster.call(
            req, CONSUMER_GROUP_HEARTBEAT.response(version), node_id=await self._coordinator()
        )
        self.assignment = set()
