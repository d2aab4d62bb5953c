"""The waiting half of classic consumer groups: JoinGroup and SyncGroup requests that the
coordinator answers later (when every member has rejoined, or the leader has synced) wait
here on futures; the coordinator itself stays sans-IO."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog
from kio.schema.errors import ErrorCode

from broker.request_order import release_order
from coordinator.classic_group import ClassicGroupCoordinator
from coordinator.classic_group import JoinResult
from coordinator.classic_group import Reply
from coordinator.classic_group import SyncResult
from coordinator.classic_group import Wait
from coordinator.classic_member import JoinRequest
from coordinator.share_group import CoordinatorError

log = structlog.get_logger("shoal.classic_groups")

_Key = tuple[Wait, str, str]  # (what, group id, member id)


class ClassicGroupService:
    def __init__(self, coordinator: ClassicGroupCoordinator, now_ms: Callable[[], int]) -> None:
        self.coordinator = coordinator
        self._now_ms = now_ms
        self._waiting: dict[_Key, asyncio.Future[JoinResult | SyncResult]] = {}

    async def join(self, req: JoinRequest) -> JoinResult:
        try:
            member_id, replies = self.coordinator.join(req, self._now_ms())
        except CoordinatorError as e:
            return JoinResult(req.member_id, error=e.error_code)
        waiting = self._answer((Wait.JOIN, req.group_id, member_id), replies)
        release_order()  # joined: now waiting on the other members
        result = await waiting
        assert isinstance(result, JoinResult)
        return result

    async def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        try:
            replies = self.coordinator.sync(
                group_id, member_id, generation_id, group_instance_id, assignments, self._now_ms()
            )
        except CoordinatorError as e:
            return SyncResult(error=e.error_code)
        waiting = self._answer((Wait.SYNC, group_id, member_id), replies)
        release_order()  # now waiting on the leader's assignment
        result = await waiting
        assert isinstance(result, SyncResult)
        return result

    def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """:raises CoordinatorError: the group is unknown."""
        codes, replies = self.coordinator.leave(group_id, leaving, self._now_ms())
        self._deliver(replies)
        return codes

    def tick(self) -> None:
        """The coordinator's timers: session timeouts and the ends of join and sync phases."""
        self._deliver(self.coordinator.tick(self._now_ms()))

    def _answer(self, key: _Key, replies: list[Reply]) -> asyncio.Future[JoinResult | SyncResult]:
        """The caller's own reply if it is among `replies`, else a future the coordinator
        completes later; every other reply goes to its waiting request."""
        loop = asyncio.get_running_loop()
        own: asyncio.Future[JoinResult | SyncResult] = loop.create_future()
        superseded = self._waiting.pop(key, None)
        if superseded is not None and not superseded.done():
            # The same member asked again (a client retry): the older request is answered.
            superseded.set_result(_retry(key[0], key[2]))
        self._waiting[key] = own
        self._deliver(replies)
        return own

    def _deliver(self, replies: list[Reply]) -> None:
        for reply in replies:
            waiter = self._waiting.pop((reply.wait, reply.group_id, reply.member_id), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(reply.result)


def _retry(wait: Wait, member_id: str) -> JoinResult | SyncResult:
    if wait is Wait.JOIN:
        return JoinResult(member_id, error=ErrorCode.rebalance_in_progress)
    return SyncResult(error=ErrorCode.rebalance_in_progress)
