"""Share groups: members, epochs, heartbeats and session timeouts (KIP-932, ShareGroupHeartbeat v1).

Sans-IO: every call takes `now_ms`; topic metadata comes in through a lookup function. The
group epoch moves whenever membership, subscriptions or the subscribed topics' partitions
change; a member catches up to it (and receives its new assignment) on its next heartbeat.
Share groups have no revocation step: an assignment takes effect at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from enum import StrEnum

import structlog
from kio.schema.errors import ErrorCode

from coordinator.assignor import Assignment
from coordinator.assignor import assign
from coordinator.errors import CoordinatorException

log = structlog.get_logger("shoal.coordinator")

LEAVE_EPOCH = -1
JOIN_EPOCH = 0

TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]


@dataclass(frozen=True, slots=True)
class CoordinatorLimits:
    # No limit on the number of groups: Kafka's group.share.max.groups sizes its share-session
    # cache and never refuses a group (the cache here is group.share.max.share.sessions).
    max_size: int = 200
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    subscribed: tuple[str, ...]
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    member_epoch: int = 0
    assignment: Assignment = field(default_factory=dict)
    deadline_ms: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # The subscribed topics' (id, partitions) when the assignment was made, to notice changes.
    topic_state: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}


class CoordinatorError(CoordinatorException):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


# Kafka bounds neither; an unbounded id is memory and log lines an attacker chooses. librdkafka
# makes 22-character member ids.
MAX_GROUP_ID_BYTES = 255
MAX_MEMBER_ID_BYTES = 255


def check_ids(group_id: str | None, member_id: str | None = "") -> None:
    """The one check of a group id (and a member id) entering the broker.

    :raises CoordinatorError: INVALID_GROUP_ID for an empty or too long group id,
        INVALID_REQUEST for a too long member id (pass None to require one).
    """
    if not group_id:
        raise CoordinatorError(ErrorCode.invalid_group_id, "group id is empty")
    if len(group_id.encode()) > MAX_GROUP_ID_BYTES:
        raise CoordinatorError(
            ErrorCode.invalid_group_id, f"group id is longer than {MAX_GROUP_ID_BYTES} bytes"
        )
    if member_id is None:
        raise CoordinatorError(ErrorCode.invalid_request, "member id must be set by the client")
    if len(member_id.encode()) > MAX_MEMBER_ID_BYTES:
        raise CoordinatorError(
            ErrorCode.invalid_request, f"member id is longer than {MAX_MEMBER_ID_BYTES} bytes"
        )


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None when unchanged since the member's last heartbeat


class DepartureReason(StrEnum):
    """Why a member left its share group (its acquired records are released either way)."""

    LEFT = "left"  # a heartbeat at epoch -1
    SESSION_TIMEOUT = "session timeout"  # no heartbeat for `share.session.timeout.ms`


@dataclass(frozen=True, slots=True)
class Departure:
    group_id: str
    member_id: str
    reason: DepartureReason


class ShareGroupCoordinator:
    def __init__(self, limits: Callable[[str], CoordinatorLimits], topics: TopicLookup) -> None:
        self._limits = limits
        self._topics = topics
        self.groups: dict[str, ShareGroup] = {}
        self.rebalances = 0  # assignments computed for a new group epoch (a metric)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed: tuple[str, ...] | None,
        now_ms: int,
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> tuple[HeartbeatResult, Departure | None]:
        """:raises CoordinatorError: with the Kafka error code the response must carry."""
        check_ids(group_id, member_id or None)
        limits = self._limits(group_id)
        if member_epoch == LEAVE_EPOCH:
            departure = self.remove_member(group_id, member_id, DepartureReason.LEFT)
            return HeartbeatResult(
                member_id, LEAVE_EPOCH, limits.heartbeat_interval_ms, None
            ), departure
        group = self.groups.get(group_id)
        if member_epoch == JOIN_EPOCH:
            group = self._join(group_id, group, member_id, subscribed, limits)
        else:
            self._check_member(group, member_id, member_epoch)
            assert group is not None
            if (
                subscribed is not None
                and tuple(sorted(subscribed)) != group.members[member_id].subscribed
            ):
                group.members[member_id].subscribed = tuple(sorted(subscribed))
                group.group_epoch += 1
        member = group.members[member_id]
        member.rack_id, member.client_id, member.client_host = rack_id, client_id, client_host
        member.deadline_ms = now_ms + limits.session_timeout_ms
        self._refresh_assignment(group)
        changed = member_epoch == JOIN_EPOCH or member.member_epoch != group.assignment_epoch
        member.member_epoch = group.assignment_epoch
        assignment = dict(member.assignment) if changed else None
        return HeartbeatResult(
            member_id, member.member_epoch, limits.heartbeat_interval_ms, assignment
        ), None

    def _join(
        self,
        group_id: str,
        group: ShareGroup | None,
        member_id: str,
        subscribed: tuple[str, ...] | None,
        limits: CoordinatorLimits,
    ) -> ShareGroup:
        if not subscribed:
            raise CoordinatorError(
                ErrorCode.invalid_request, "a joining member must subscribe to topics"
            )
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        if member_id not in group.members and len(group.members) >= limits.max_size:
            raise CoordinatorError(
                ErrorCode.group_max_size_reached, f"at most {limits.max_size} members"
            )
        # A member that rejoins with its id (after a fence) starts afresh under the same id.
        group.members[member_id] = ShareGroupMember(member_id, tuple(sorted(subscribed)))
        group.group_epoch += 1
        log.info("member joined", group=group_id, member=member_id, topics=list(subscribed))
        return group

    @staticmethod
    def _check_member(group: ShareGroup | None, member_id: str, member_epoch: int) -> None:
        member = group.members.get(member_id) if group else None
        if member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"member {member_id} is not in the group"
            )
        if member_epoch != member.member_epoch:
            log.info("member fenced", group=group.group_id if group else None, member=member_id,
                     epoch=member_epoch, expected=member.member_epoch)  # fmt: skip
            raise CoordinatorError(
                ErrorCode.fenced_member_epoch,
                f"epoch {member_epoch}, expected {member.member_epoch}",
            )

    def _refresh_assignment(self, group: ShareGroup) -> None:
        """Re-run the assignor when the group epoch moved or the subscribed topics changed."""
        topic_state = {}
        for name in sorted(group.subscribed_topics()):
            found = self._topics(name)
            if found is not None:
                topic_state[name] = found
        if topic_state != group.topic_state:
            group.topic_state = topic_state
            if group.assignment_epoch == group.group_epoch:  # not already due for a new one
                group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return
        subscriptions = {
            m.member_id: [topic_state[t][0] for t in m.subscribed if t in topic_state]
            for m in group.members.values()
        }
        counts = {tid: n for tid, n in topic_state.values()}
        for member_id, assignment in assign(subscriptions, counts).items():
            group.members[member_id].assignment = assignment
        group.assignment_epoch = group.group_epoch
        self.rebalances += 1

    def remove_member(
        self, group_id: str, member_id: str, reason: DepartureReason
    ) -> Departure | None:
        group = self.groups.get(group_id)
        member = group.members.pop(member_id, None) if group is not None else None
        if group is None or member is None:
            return None
        group.group_epoch += 1
        # A session timeout runs off any request: the member's own client id says whose it was.
        log.info("member left", group=group_id, member=member_id, reason=reason.value,
                 client_id=member.client_id, client_host=member.client_host)  # fmt: skip
        return Departure(group_id, member_id, reason)

    def expire(self, now_ms: int) -> list[Departure]:
        """Remove every member whose session timed out."""
        late = [
            (g.group_id, m.member_id)
            for g in self.groups.values()
            for m in g.members.values()
            if m.deadline_ms <= now_ms
        ]
        departures = [self.remove_member(g, m, DepartureReason.SESSION_TIMEOUT) for g, m in late]
        return [d for d in departures if d is not None]

    def delete_group(self, group_id: str) -> None:
        """:raises CoordinatorError: the group is unknown or still has members."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"no share group {group_id}")
        if group.members:
            raise CoordinatorError(ErrorCode.non_empty_group, f"share group {group_id} has members")
        del self.groups[group_id]

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members
