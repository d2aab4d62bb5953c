"""Share-group membership: the ShareGroupHeartbeat v1 loop of one share consumer.

The member id is made here, once, and kept across rejoins (KIP-932: the client owns it).
Heartbeats go to the coordinator on their own connection so a long-polling ShareFetch to the
same broker never holds them up.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from client.cluster import API_SHARE_GROUP_HEARTBEAT
from client.cluster import Cluster
from client.connection import ConnectionClosed
from client.errors import CoordinatorError
from client.errors import KafkaError
from client.errors import MembershipError
from client.errors import error_for
from client.kio_apis import SHARE_GROUP_HEARTBEAT
from protocol.messages import build

log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
HEARTBEAT_CHANNEL = "heartbeat"
_BACKOFF_S = (0.05, 1.0)
_REJOIN = (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch)

TopicPartitionId = tuple[uuid.UUID, int]


def new_member_id() -> str:
    """22 characters of urlsafe base64 of a random uuid, as the Java client and librdkafka make."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ShareMembership:
    """Joins, heartbeats, rejoins after fencing, and leaves; exposes the current assignment."""

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        *,
        on_assignment: Callable[[frozenset[TopicPartitionId]], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.member_id = new_member_id()
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval_s = 5.0
        self.assignment: frozenset[TopicPartitionId] = frozenset()
        self.fatal: KafkaError | None = None
        self._on_assignment = on_assignment
        self._subscription: tuple[str, ...] = ()
        self._send_subscription = True
        self._coordinator: int | None = None
        self._joined = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._subscription

    def subscribe(self, topics: tuple[str, ...]) -> None:
        if topics != self._subscription:
            self._subscription = topics
            self._send_subscription = True
            self._wake.set()

    def start(self) -> None:
        if self._task is None and self._subscription:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_joined(self, timeout_s: float) -> bool:
        """True once a heartbeat has given this member an epoch (or failed for good)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._joined.wait(), max(timeout_s, 0))
        return self._joined.is_set()

    def poke(self) -> None:
        """Heartbeat now (the fetch path saw UNKNOWN_MEMBER_ID, for example)."""
        self._wake.set()

    async def leave(self) -> None:
        """Stop heartbeating and leave the group with epoch -1 (if it ever joined)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.member_epoch > JOIN_EPOCH and self._coordinator is not None:
            with contextlib.suppress(KafkaError, ConnectionError):
                await self._send(LEAVE_EPOCH, None)
        self.member_epoch = LEAVE_EPOCH

    async def _run(self) -> None:
        backoff = _BACKOFF_S[0]
        while not self._stopping:
            try:
                await self._heartbeat()
                backoff = _BACKOFF_S[0]
            except MembershipError as e:
                # Same member id, epoch 0, full subscription: the broker re-adds us.
                log.info("share group %s: rejoining after %s", self.group_id, e.error_code.name)
                self.member_epoch = JOIN_EPOCH
                self._send_subscription = True
                continue
            except (CoordinatorError, ConnectionClosed, OSError) as e:
                log.info("share group %s: coordinator unavailable: %s", self.group_id, e)
                self._coordinator = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_S[1])
                continue
            except KafkaError as e:
                if e.retriable:
                    await asyncio.sleep(backoff)
                    continue
                self.fatal = e
                self._joined.set()  # wake a waiting poll so it can raise
                return
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.heartbeat_interval_s)

    async def _heartbeat(self) -> None:
        topics = self._subscription if self._send_subscription or not self.member_epoch else None
        resp = await self._send(self.member_epoch, topics)
        if resp.error_code in _REJOIN:
            raise MembershipError(resp.error_code, resp.error_message)
        if resp.error_code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available):
            raise CoordinatorError(resp.error_code, resp.error_message)
        if resp.error_code != ErrorCode.none:
            raise error_for(resp.error_code, resp.error_message)
        if topics is not None:
            self._send_subscription = False
        self.member_epoch = int(resp.member_epoch)
        self.heartbeat_interval_s = max(resp.heartbeat_interval.total_seconds(), 0.01)
        if resp.assignment is not None:
            self.assignment = frozenset(
                (tp.topic_id, int(p))
                for tp in resp.assignment.topic_partitions
                for p in tp.partitions
            )
            if self._on_assignment is not None:
                self._on_assignment(self.assignment)
        self._joined.set()

    async def _send(self, epoch: int, topics: tuple[str, ...] | None) -> Any:
        if self._coordinator is None:
            self._coordinator = (
                await self.cluster.find_coordinator(self.group_id, channel=HEARTBEAT_CHANNEL)
            ).node_id
        version = self.cluster.version(API_SHARE_GROUP_HEARTBEAT, 1, 1)
        m = SHARE_GROUP_HEARTBEAT.requests(version)
        req = build(
            m.ShareGroupHeartbeatRequest,
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=topics,
        )
        return await self.cluster.call(
            req,
            SHARE_GROUP_HEARTBEAT.response(version),
            node_id=self._coordinator,
            channel=HEARTBEAT_CHANNEL,
        )
