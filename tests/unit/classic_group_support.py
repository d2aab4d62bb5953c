"""Helpers for driving `ClassicGroupCoordinator` in unit tests (no sockets, time passed in)."""

from __future__ import annotations

from coordinator.classic_group import ClassicGroupCoordinator
from coordinator.classic_group import ClassicLimits
from coordinator.classic_group import JoinResult
from coordinator.classic_group import Reply
from coordinator.classic_group import SyncResult
from coordinator.classic_group import Wait
from coordinator.classic_member import JoinRequest

GROUP = "g"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
RANGE = (("range", b"range-meta"),)


def make(initial_delay_ms: int = 0, max_size: int = 2**31 - 1) -> ClassicGroupCoordinator:
    limits = ClassicLimits(initial_rebalance_delay_ms=initial_delay_ms, max_size=max_size)
    return ClassicGroupCoordinator(lambda: limits)


def join_request(
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = RANGE,
    protocol_type: str = "consumer",
    version: int = 9,
    session_ms: int = SESSION_MS,
) -> JoinRequest:
    return JoinRequest(
        group_id=GROUP,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=protocols,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_MS,
        require_known_member_id=version >= 4,
        can_skip_assignment=version >= 9,
        client_id="client",
    )


def joins(replies: list[Reply]) -> dict[str, JoinResult]:
    out = {}
    for r in replies:
        if r.wait is Wait.JOIN:
            assert isinstance(r.result, JoinResult)
            out[r.member_id] = r.result
    return out


def syncs(replies: list[Reply]) -> dict[str, SyncResult]:
    out = {}
    for r in replies:
        if r.wait is Wait.SYNC:
            assert isinstance(r.result, SyncResult)
            out[r.member_id] = r.result
    return out


def new_member(c: ClassicGroupCoordinator, now: int, **kw: object) -> tuple[str, list[Reply]]:
    """MEMBER_ID_REQUIRED, then the join with the given id (KIP-394's two steps)."""
    member_id, replies = c.join(join_request(**kw), now)  # type: ignore[arg-type]
    assert joins(replies)[member_id].error.name == "member_id_required"
    return c.join(join_request(member_id, **kw), now)  # type: ignore[arg-type]
