"""A classic consumer group's member, and the JoinGroup request as the coordinator sees it."""

from __future__ import annotations

from dataclasses import dataclass

Protocols = tuple[tuple[str, bytes], ...]  # (protocol name, member metadata), by preference


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    # JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED and its id (KIP-394).
    require_known_member_id: bool = True
    # JoinGroup v9+: a static leader that rejoins may skip the assignment (KIP-814).
    can_skip_assignment: bool = True
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    deadline_ms: int = 0  # the session ends then without a heartbeat
    assignment: bytes = b""
    awaiting_join: bool = True
    awaiting_sync: bool = False
    changed: bool = False  # its last JoinGroup changed its protocols

    @classmethod
    def joining(cls, req: JoinRequest, member_id: str, now_ms: int) -> ClassicMember:
        return cls(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            client_id=req.client_id,
            client_host=req.client_host,
            deadline_ms=now_ms + req.session_timeout_ms,
        )

    def update(self, req: JoinRequest, now_ms: int) -> None:
        self.changed = req.protocols != self.protocols
        self.protocols = req.protocols
        self.session_timeout_ms = req.session_timeout_ms
        self.rebalance_timeout_ms = req.rebalance_timeout_ms
        self.deadline_ms = now_ms + req.session_timeout_ms

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        return next(meta for name, meta in self.protocols if name == protocol)
