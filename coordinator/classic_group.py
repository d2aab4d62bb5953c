"""Classic consumer groups: Kafka's JoinGroup/SyncGroup/Heartbeat/LeaveGroup protocol.

Sans-IO: every call takes `now_ms` and returns the `Reply`s it makes due (the caller's own
and those of other members' requests that were waiting); the broker holds the waiting
requests. States as Kafka's `ClassicGroupState`: Empty -> PreparingRebalance (members
rejoin) -> CompletingRebalance (members wait for the leader's SyncGroup) -> Stable. The
broker never computes an assignment: the leader gets the member list and sends it back.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

import structlog
from kio.schema.errors import ErrorCode

from coordinator.classic_member import ClassicMember
from coordinator.classic_member import JoinRequest
from coordinator.share_group import CoordinatorError
from coordinator.share_group import check_ids

log = structlog.get_logger("shoal.coordinator.classic")


class GroupState(enum.StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class Wait(enum.Enum):
    JOIN = "join"
    SYNC = "sync"


@dataclass(frozen=True, slots=True)
class JoinResult:
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    # (member id, group instance id, metadata): for the leader only.
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class SyncResult:
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a waiting JoinGroup or SyncGroup of (group, member)."""

    wait: Wait
    group_id: str
    member_id: str
    result: JoinResult | SyncResult


@dataclass(frozen=True, slots=True)
class ClassicLimits:
    """Kafka's broker configs of the same names, with Kafka's defaults."""

    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet: id -> expiry.
    pending: dict[str, int] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # group instance id -> member id
    rebalance_deadline_ms: int = 0  # PreparingRebalance: the join ends then at the latest
    initial_join_ends_ms: int = 0  # the initial delay's cap (Empty -> PreparingRebalance)
    in_initial_delay: bool = False
    sync_deadline_ms: int = 0  # CompletingRebalance: members that have not synced are removed

    def all_joined(self) -> bool:
        return not self.pending and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def select_protocol(self) -> str | None:
        """The protocol every member supports, by the members' votes (Kafka's rule)."""
        if not self.members:
            return None
        common = set.intersection(*(set(m.protocol_names()) for m in self.members.values()))
        votes: dict[str, int] = dict.fromkeys(common, 0)
        for m in self.members.values():
            votes[next(p for p in m.protocol_names() if p in common)] += 1
        return max(sorted(votes), key=lambda p: votes[p]) if votes else None

    def supports(self, protocol_type: str, names: Sequence[str]) -> bool:
        """A joining member fits: same protocol type, one protocol shared with all members."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        if any(m.protocol_type != protocol_type for m in self.members.values()):
            return False
        # One set per member: testing each name against each member's list was quadratic
        # (a JoinGroup may list a million protocols).
        shared = set(names)
        for m in self.members.values():
            shared.intersection_update(m.protocol_names())
        return bool(shared)


class ClassicGroupCoordinator:
    def __init__(self, limits: Callable[[], ClassicLimits]) -> None:
        self._limits = limits
        self.groups: dict[str, ClassicGroup] = {}
        self.rebalances = 0  # completed joins, for the metrics

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """OffsetDelete's guard. The subscriptions sit in the members' opaque protocol
        metadata, which the broker only relays: any live member counts as subscribed."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    # JoinGroup --------------------------------------------------------------------------

    def join(self, req: JoinRequest, now_ms: int) -> tuple[str, list[Reply]]:
        """The member id the request is answered for, and the replies now due (the caller's
        own among them, unless it must wait for the rebalance).

        :raises CoordinatorError: with the code of an answer that needs no group change.
        """
        check_ids(req.group_id, req.member_id)
        limits = self._limits()
        if not (
            limits.min_session_timeout_ms <= req.session_timeout_ms <= limits.max_session_timeout_ms
        ):
            raise CoordinatorError(
                ErrorCode.invalid_session_timeout, f"session timeout {req.session_timeout_ms}"
            )
        group = self.groups.get(req.group_id) or ClassicGroup(req.group_id)
        if not group.supports(req.protocol_type, [n for n, _ in req.protocols]):
            raise CoordinatorError(
                ErrorCode.inconsistent_group_protocol, "no protocol in common with the group"
            )
        if req.member_id:  # an unknown member of an unknown group makes no group
            return req.member_id, self._join_known(group, req, now_ms)
        self.groups[req.group_id] = group
        return self._join_new(group, req, now_ms, limits)

    def _join_new(
        self, group: ClassicGroup, req: JoinRequest, now_ms: int, limits: ClassicLimits
    ) -> tuple[str, list[Reply]]:
        member_id = f"{req.client_id or 'member'}-{uuid.uuid4()}"
        if req.group_instance_id is not None and req.group_instance_id in group.static:
            return member_id, self._replace_static(group, req, member_id, now_ms)
        if len(group.members) + len(group.pending) >= limits.max_size:
            raise CoordinatorError(
                ErrorCode.group_max_size_reached, f"at most {limits.max_size} members"
            )
        if req.require_known_member_id and req.group_instance_id is None:
            # KIP-394: the member rejoins with this id, so a lost answer leaves no ghost.
            group.pending[member_id] = now_ms + req.session_timeout_ms
            return member_id, [
                _join_reply(group, member_id, JoinResult(member_id, error=_MEMBER_ID_REQUIRED))
            ]
        return member_id, self._add_member(group, req, member_id, now_ms)

    def _join_known(self, group: ClassicGroup, req: JoinRequest, now_ms: int) -> list[Reply]:
        member_id = req.member_id
        if member_id in group.pending:
            del group.pending[member_id]
            return self._add_member(group, req, member_id, now_ms)
        member = self._member(group, member_id, req.group_instance_id)
        member.update(req, now_ms)
        member.awaiting_join = True
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._maybe_complete_join(group, now_ms)
        unchanged = not member.changed and (
            group.state is GroupState.COMPLETING_REBALANCE
            or (group.state is GroupState.STABLE and member_id != group.leader)
        )
        if unchanged:
            # Nothing changed: the current generation stands (Kafka answers at once).
            member.awaiting_join = False
            return [_join_reply(group, member_id, self._join_result(group, member_id))]
        return self._prepare_rebalance(group, now_ms, f"member {member_id} rejoined")

    def _add_member(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, now_ms: int
    ) -> list[Reply]:
        member = ClassicMember.joining(req, member_id, now_ms)
        group.members[member_id] = member
        if req.group_instance_id is not None:
            group.static[req.group_instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        log.info("member joining", group=group.group_id, member=member_id,
                 client=req.client_id, instance=req.group_instance_id)  # fmt: skip
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.in_initial_delay:
                delay = self._limits().initial_rebalance_delay_ms
                group.rebalance_deadline_ms = min(now_ms + delay, group.initial_join_ends_ms)
            return self._maybe_complete_join(group, now_ms)
        return self._prepare_rebalance(group, now_ms, f"member {member_id} joined")

    def _replace_static(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, now_ms: int
    ) -> list[Reply]:
        """A known static member rejoins with no member id: it takes over under a new id with
        the old one's assignment, and the old id is fenced (Kafka's
        `updateStaticMemberThenRebalanceOrCompleteJoin`). A Stable group whose protocol would
        not change keeps its generation: no rebalance, leader or not."""
        assert req.group_instance_id is not None
        old_id = group.static[req.group_instance_id]
        previous_leader = group.leader
        old = group.members.pop(old_id)
        replies = self._release(group, old, ErrorCode.fenced_instance_id)
        log.info("member fenced", group=group.group_id, member=old_id)
        member = ClassicMember.joining(req, member_id, now_ms)
        member.assignment = old.assignment
        group.members[member_id] = member
        group.static[req.group_instance_id] = member_id
        if group.leader == old_id:
            group.leader = member_id
        log.info("static member replaced", group=group.group_id, old=old_id, member=member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            return replies + self._maybe_complete_join(group, now_ms)
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            member.awaiting_join = False
            result = self._static_rejoin_result(group, req, member_id, previous_leader)
            return [*replies, _join_reply(group, member_id, result)]
        return replies + self._prepare_rebalance(group, now_ms, f"static member {member_id}")

    def _static_rejoin_result(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, previous_leader: str | None
    ) -> JoinResult:
        """The current generation for a static member back in a Stable group. JoinGroup v9+
        (KIP-814): the leader gets the members and SkipAssignment. Older versions cannot skip
        the assignment, and an assignment the leader sent a Stable group would reach nobody:
        they are given the leader id from before the rejoin, so a returning leader sees
        another id, acts as a follower and syncs to get its assignment back."""
        if req.can_skip_assignment:
            return self._join_result(group, member_id, skip=group.leader == member_id)
        return JoinResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=previous_leader or "",
        )

    @staticmethod
    def _release(group: ClassicGroup, old: ClassicMember, code: ErrorCode) -> list[Reply]:
        """Answer whatever a member that is replaced or removed was waiting for with `code`."""
        replies = []
        if old.awaiting_join:
            result = JoinResult(old.member_id, error=code)
            replies.append(_join_reply(group, old.member_id, result))
        if old.awaiting_sync:
            replies.append(Reply(Wait.SYNC, group.group_id, old.member_id, _sync_error(code)))
        return replies

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, reason: str) -> list[Reply]:
        replies = self._abort_sync(group)
        if group.state is GroupState.EMPTY:
            delay = self._limits().initial_rebalance_delay_ms
            group.in_initial_delay = delay > 0
            group.initial_join_ends_ms = now_ms + max(delay, group.rebalance_timeout_ms())
            group.rebalance_deadline_ms = now_ms + delay
        else:
            group.in_initial_delay = False
            group.rebalance_deadline_ms = now_ms + group.rebalance_timeout_ms()
        group.state = GroupState.PREPARING_REBALANCE
        log.info("rebalance started", group=group.group_id, reason=reason)
        return replies + self._maybe_complete_join(group, now_ms)

    def _abort_sync(self, group: ClassicGroup) -> list[Reply]:
        """Members waiting in SyncGroup when a new rebalance starts must rejoin."""
        replies = []
        for m in group.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                replies.append(
                    Reply(Wait.SYNC, group.group_id, m.member_id, _sync_error(_REBALANCING))
                )
        return replies

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> list[Reply]:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return []
        waiting = group.in_initial_delay or not group.all_joined()
        if waiting and now_ms < group.rebalance_deadline_ms:
            return []
        return self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> list[Reply]:
        group.pending.clear()
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            self._drop(group, m, "did not rejoin in time")
        group.generation_id += 1
        group.in_initial_delay = False
        self.rebalances += 1
        if not group.members:
            group.state = GroupState.EMPTY
            # The protocol type stays while the group exists (Kafka's initNextGeneration).
            group.protocol_name = group.leader = None
            log.info("group emptied", group=group.group_id, generation=group.generation_id)
            return []
        group.state = GroupState.COMPLETING_REBALANCE
        group.protocol_name = group.select_protocol()
        group.protocol_type = next(iter(group.members.values())).protocol_type
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()
        log.info(
            "rebalance completed",
            group=group.group_id,
            generation=group.generation_id,
            members=len(group.members),
            protocol=group.protocol_name,
        )
        replies = []
        for m in group.members.values():
            m.awaiting_join = False
            m.assignment = b""
            m.deadline_ms = now_ms + m.session_timeout_ms
            replies.append(_join_reply(group, m.member_id, self._join_result(group, m.member_id)))
        return replies

    def _join_result(self, group: ClassicGroup, member_id: str, skip: bool = False) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member_id == group.leader and group.protocol_name is not None:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader or "",
            skip_assignment=skip,
            members=members,
        )

    # SyncGroup, Heartbeat, LeaveGroup -----------------------------------------------------

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        now_ms: int,
    ) -> list[Reply]:
        """:raises CoordinatorError: the member or generation is wrong, or a rebalance is on."""
        group = self._group(group_id)
        member = self._member(group, member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise CoordinatorError(ErrorCode.illegal_generation, f"generation {generation_id}")
        if group.state is GroupState.PREPARING_REBALANCE:
            raise CoordinatorError(ErrorCode.rebalance_in_progress, "the group is rebalancing")
        member.deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            return [Reply(Wait.SYNC, group_id, member_id, self._sync_result(group, member))]
        member.awaiting_sync = True
        if member_id != group.leader:
            return []
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        group.state = GroupState.STABLE
        log.info("group stable", group=group_id, generation=group.generation_id)
        replies = []
        for m in group.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                replies.append(Reply(Wait.SYNC, group_id, m.member_id, self._sync_result(group, m)))
        return replies

    @staticmethod
    def _sync_result(group: ClassicGroup, member: ClassicMember) -> SyncResult:
        return SyncResult(member.assignment, group.protocol_type, group.protocol_name)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        try:
            group = self._group(group_id)
            member = self._member(group, member_id, group_instance_id)
        except CoordinatorError as e:
            return e.error_code
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, leaving: Sequence[tuple[str, str | None]], now_ms: int
    ) -> tuple[list[ErrorCode], list[Reply]]:
        """Remove members by (member id, group instance id): one error code each (v3+
        batches them; a static member may be named by its instance id alone).

        :raises CoordinatorError: the group is unknown.
        """
        group = self._group(group_id)
        codes: list[ErrorCode] = []
        replies: list[Reply] = []
        for member_id, instance_id in leaving:
            try:
                member = self._leaving(group, member_id, instance_id)
            except CoordinatorError as e:
                codes.append(e.error_code)
                continue
            codes.append(ErrorCode.none)
            replies += self._remove(group, member, "left the group", now_ms)
        return codes, replies

    def _leaving(
        self, group: ClassicGroup, member_id: str, instance_id: str | None
    ) -> ClassicMember:
        if instance_id is not None and not member_id:
            found = group.static.get(instance_id)
            if found is None:
                raise CoordinatorError(ErrorCode.unknown_member_id, f"no instance {instance_id}")
            return group.members[found]
        if member_id in group.pending:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"{member_id} has not joined")
        return self._member(group, member_id, instance_id)

    def _remove(
        self, group: ClassicGroup, member: ClassicMember, reason: str, now_ms: int
    ) -> list[Reply]:
        replies = self._release(group, member, ErrorCode.unknown_member_id)
        self._drop(group, member, reason)
        if group.state is GroupState.PREPARING_REBALANCE:
            return replies + self._maybe_complete_join(group, now_ms)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            reason = f"member {member.member_id} {reason}"
            return replies + self._prepare_rebalance(group, now_ms, reason)
        return replies

    def _drop(self, group: ClassicGroup, member: ClassicMember, reason: str) -> None:
        del group.members[member.member_id]
        if member.group_instance_id is not None:
            group.static.pop(member.group_instance_id, None)
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)
        log.info("member removed", group=group.group_id, member=member.member_id,
                 client=member.client_id, reason=reason)  # fmt: skip

    # Time ----------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Reply]:
        """Session timeouts, the end of a join phase, members that never synced."""
        replies: list[Reply] = []
        for group in list(self.groups.values()):
            replies += self._tick_group(group, now_ms)
            if group.generation_id == 0 and not group.members and not group.pending:
                # Never formed (only ids handed out that nobody used): nothing to keep.
                del self.groups[group.group_id]
        return replies

    def _tick_group(self, group: ClassicGroup, now_ms: int) -> list[Reply]:
        group.pending = {m: t for m, t in group.pending.items() if t > now_ms}
        replies = []
        for m in list(group.members.values()):
            # A member waiting in JoinGroup is bounded by the rebalance timeout instead.
            if m.member_id in group.members and not m.awaiting_join and m.deadline_ms <= now_ms:
                replies += self._remove(group, m, "session timeout", now_ms)
        if group.state is GroupState.COMPLETING_REBALANCE and group.sync_deadline_ms <= now_ms:
            for m in [m for m in group.members.values() if not m.awaiting_sync]:
                self._drop(group, m, "did not sync in time")
            replies += self._prepare_rebalance(group, now_ms, "sync timeout")
        return replies + self._maybe_complete_join(group, now_ms)

    # Offset commits and lookups ------------------------------------------------------------

    def check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode | None:
        """Kafka's `ClassicGroup.validateOffsetCommit`; None for a group not known here."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.state is GroupState.EMPTY and generation_id < 0:
            return ErrorCode.none  # the admin client or a consumer that assigns itself
        if generation_id >= 0 or member_id or group_instance_id is not None:
            try:
                self._member(group, member_id, group_instance_id)
            except CoordinatorError as e:
                return e.error_code
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
        elif group.state is not GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def delete_group(self, group_id: str) -> None:
        """:raises CoordinatorError: GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"no consumer group {group_id}")
        if group.members or group.pending:
            raise CoordinatorError(ErrorCode.non_empty_group, f"{group_id} has members")
        del self.groups[group_id]
        log.info("group deleted", group=group_id)

    def counts_by_state(self) -> dict[GroupState, int]:
        counts = dict.fromkeys(GroupState, 0)
        for g in self.groups.values():
            counts[g.state] += 1
        return counts

    def _group(self, group_id: str) -> ClassicGroup:
        check_ids(group_id)
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"no consumer group {group_id}")
        return group

    @staticmethod
    def _member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ClassicMember:
        """:raises CoordinatorError: FENCED_INSTANCE_ID for a stale static member id,
        UNKNOWN_MEMBER_ID for a member the group does not hold."""
        if instance_id is not None:
            current = group.static.get(instance_id)
            if current is not None and current != member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id, f"{member_id} was replaced")
        member = group.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"no member {member_id}")
        return member

    def __iter__(self) -> Iterator[ClassicGroup]:
        return iter(self.groups.values())


_MEMBER_ID_REQUIRED = ErrorCode.member_id_required
_REBALANCING = ErrorCode.rebalance_in_progress


def _join_reply(group: ClassicGroup, member_id: str, result: JoinResult) -> Reply:
    return Reply(Wait.JOIN, group.group_id, member_id, result)


def _sync_error(code: ErrorCode) -> SyncResult:
    return SyncResult(error=code)
