"""KIP-848 consumer groups: members, epochs, target assignments and revocation.

Sans-IO: every call takes `now_ms`; topic metadata comes in through lookup functions. As in
share groups (`coordinator/share_group.py`), the group epoch moves whenever membership,
subscriptions or the subscribed topics' partitions change, and the server-side assignor then
computes a new *target* assignment. What consumer groups add is revocation: a member only
reaches its target in steps, and a partition moves to a new owner only after its previous
owner's heartbeat shows it released it. So a partition is never owned by two members at once:
- STABLE: the member's assignment is its target, at the assignment epoch.
- UNREVOKED_PARTITIONS: it was told to give up `pending_revocation` and keeps its old epoch
  until it reports owned partitions without them (or is fenced after the rebalance timeout).
- UNRELEASED_PARTITIONS: it is at the new epoch, but part of its target is still owned (held
  or pending revocation) by other members; it receives those once they are released.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field
from enum import Enum
from typing import Any

import re2
import structlog
from kio.schema.errors import ErrorCode

from coordinator.assignor import Assignment
from coordinator.consumer_assignors import ASSIGNORS
from coordinator.group_registry import GroupKind
from coordinator.share_group import CoordinatorError
from coordinator.share_group import TopicLookup
from coordinator.share_group import check_ids
from coordinator.share_group_admin import GroupListing

log = structlog.get_logger("shoal.coordinator")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2  # a static member that will come back under the same instance id
GROUP_TYPE = GroupKind.CONSUMER.value  # ListGroups' type and protocol type for these groups
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000  # the client's max.poll.interval.ms default

TopicPartition = tuple[uuid.UUID, int]


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerLimits:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: tuple[str, ...] = ()
    regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS
    member_epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = frozenset()
    pending_revocation: frozenset[TopicPartition] = frozenset()
    sent: frozenset[TopicPartition] | None = None  # the assignment last sent to the client
    deadline_ms: int = 0  # session timeout
    revoke_deadline_ms: int = 0  # rebalance timeout, while partitions are pending revocation


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    # The subscribed topics' (id, partitions) when the target was computed, to notice changes.
    topic_state: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's names; a target is computed at once, so never "Assigning" for long."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.group_epoch:
            return "Assigning"
        if any(
            m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch
            for m in self.members.values()
            if m.member_epoch != STATIC_LEAVE_EPOCH
        ):
            return "Reconciling"
        return "Stable"

    def held(self, exclude: str = "") -> set[TopicPartition]:
        """Every partition some member (but `exclude`) holds, assigned or pending revocation."""
        out: set[TopicPartition] = set()
        for m in self.members.values():
            if m.member_id != exclude:
                out |= m.assigned | m.pending_revocation
        return out


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    """One ConsumerGroupHeartbeat's fields; None means "unchanged since the last heartbeat"."""

    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: tuple[str, ...] | None = None
    regex: str | None = None
    server_assignor: str | None = None
    owned: frozenset[TopicPartition] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None when unchanged since the last one sent


def grouped(partitions: Iterable[TopicPartition]) -> Assignment:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, p in partitions:
        out.setdefault(topic_id, []).append(p)
    return {t: tuple(sorted(ps)) for t, ps in sorted(out.items())}


def flat(assignment: Assignment) -> frozenset[TopicPartition]:
    return frozenset((t, p) for t, ps in assignment.items() for p in ps)


def _compile(regex: str) -> Any:
    """RE2, as Kafka's RE2J: linear-time matching, so a client's regex cannot stall the loop."""
    try:
        return re2.compile(regex)
    except re2.error as e:
        raise CoordinatorError(
            ErrorCode.invalid_regular_expression, f"invalid regex {regex!r}"
        ) from e


class ConsumerGroupCoordinator:
    def __init__(
        self,
        limits: Callable[[str], ConsumerLimits],
        topics: TopicLookup,
        topic_names: Callable[[], Iterable[str]] = tuple,
        other_kind: Callable[[str], bool] = lambda _: False,
    ) -> None:
        """`topic_names`: every topic, for regex subscriptions; `other_kind`: whether a group
        id this coordinator does not hold is taken by another kind of group (share, classic),
        in memory or on disk (a share group before any member returns after a restart)."""
        self._limits = limits
        self._topics = topics
        self._topic_names = topic_names
        self._other_kind = other_kind
        self.groups: dict[str, ConsumerGroup] = {}
        self.rebalances = 0  # target assignments computed, for the metrics (Kafka's count)

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def is_subscribed(self, group_id: str, topic: str) -> bool:
        """OffsetDelete's guard: a live member names `topic`, or subscribes by a regex (taken
        as matching: refusing a delete is the safe side)."""
        group = self.groups.get(group_id)
        return group is not None and any(
            topic in m.subscribed or m.regex is not None for m in group.members.values()
        )

    # -- the heartbeat ---------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, request: ConsumerHeartbeat, now_ms: int
    ) -> ConsumerHeartbeatResult:
        """:raises CoordinatorError: with the Kafka error code the response must carry."""
        epoch = request.member_epoch
        if epoch == JOIN_EPOCH and not member_id:
            member_id = uuid.uuid4().hex  # v0: the coordinator names the member
        check_ids(group_id, member_id or None)
        # An id is one kind at a time: asked only of ids this coordinator does not hold (the
        # other kinds' look-up may read what is on disk).
        if group_id not in self.groups and self._other_kind(group_id):
            raise CoordinatorError(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group."
            )
        limits = self._limits(group_id)
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            self._leave(group_id, member_id, epoch)
            return ConsumerHeartbeatResult(member_id, epoch, limits.heartbeat_interval_ms, None)
        if epoch == JOIN_EPOCH:
            group, member = self._join(group_id, member_id, request, limits)
        else:
            group, member = self._existing(group_id, member_id, request)
        self._update(group, member, request, limits)
        member.deadline_ms = now_ms + limits.session_timeout_ms
        self._refresh_target(group, limits)
        self._reconcile(group, member, request.owned, now_ms)
        return ConsumerHeartbeatResult(
            member_id,
            member.member_epoch,
            limits.heartbeat_interval_ms,
            self._to_send(member, request),
        )

    def _join(
        self, group_id: str, member_id: str, request: ConsumerHeartbeat, limits: ConsumerLimits
    ) -> tuple[ConsumerGroup, ConsumerGroupMember]:
        if request.subscribed is None and request.regex is None:
            raise CoordinatorError(
                ErrorCode.invalid_request, "a joining member must subscribe to topics or a regex"
            )
        group = self.groups.get(group_id) or self.groups.setdefault(
            group_id, ConsumerGroup(group_id)
        )
        if member_id in group.members:
            # Rejoining with epoch 0 (after a fence): the client dropped its partitions.
            self._remove(group, member_id, "rejoined")
        replaced = self._static_predecessor(group, request.instance_id)
        if replaced is None and len(group.members) >= limits.max_size:
            raise CoordinatorError(
                ErrorCode.group_max_size_reached, f"at most {limits.max_size} members"
            )
        member = ConsumerGroupMember(member_id, instance_id=request.instance_id)
        if replaced is not None:  # takes over the departed static member's place as it was
            member.member_epoch, member.previous_epoch = group.assignment_epoch, -1
            member.assigned, member.pending_revocation = replaced.assigned, frozenset()
            member.subscribed, member.regex = replaced.subscribed, replaced.regex
            del group.members[replaced.member_id]
            group.target[member_id] = group.target.pop(replaced.member_id, frozenset())
            member.state = (
                MemberState.STABLE
                if member.assigned == group.target[member_id]
                else MemberState.UNRELEASED_PARTITIONS
            )
        else:
            group.group_epoch += 1
        group.members[member_id] = member
        log.info("consumer joined", group=group_id, member=member_id, client=request.client_id,
                 instance=request.instance_id)  # fmt: skip
        return group, member

    @staticmethod
    def _static_predecessor(
        group: ConsumerGroup, instance_id: str | None
    ) -> ConsumerGroupMember | None:
        """The member that left under `instance_id` (epoch -2), which a new one replaces.

        :raises CoordinatorError: UNRELEASED_INSTANCE_ID, another live member holds it.
        """
        if instance_id is None:
            return None
        for m in group.members.values():
            if m.instance_id == instance_id:
                if m.member_epoch != STATIC_LEAVE_EPOCH:
                    raise CoordinatorError(
                        ErrorCode.unreleased_instance_id,
                        f"instance {instance_id} is still held by member {m.member_id}",
                    )
                return m
        return None

    def _existing(
        self, group_id: str, member_id: str, request: ConsumerHeartbeat
    ) -> tuple[ConsumerGroup, ConsumerGroupMember]:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"member {member_id} is not in the group"
            )
        epoch = request.member_epoch
        if epoch == member.member_epoch:
            return group, member
        # A lost response: the previous epoch is accepted while the member owns nothing more
        # than its assignment (Kafka's rule), else the member is fenced and must rejoin.
        if (
            epoch == member.previous_epoch
            and request.owned is not None
            and request.owned <= member.assigned
        ):
            return group, member
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch, f"epoch {epoch}, expected {member.member_epoch}"
        )

    @staticmethod
    def _update(
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        request: ConsumerHeartbeat,
        limits: ConsumerLimits,
    ) -> None:
        """Take the fields the client sent; a change of what it wants moves the group epoch."""
        if request.regex is not None:
            _compile(request.regex)
        if request.server_assignor is not None and request.server_assignor not in limits.assignors:
            raise CoordinatorError(
                ErrorCode.unsupported_assignor,
                f"assignor {request.server_assignor!r} is not one of {list(limits.assignors)}",
            )
        wanted = (
            tuple(sorted(request.subscribed))
            if request.subscribed is not None
            else member.subscribed,
            request.regex if request.regex is not None else member.regex,
            request.server_assignor or member.server_assignor,
        )
        if wanted != (member.subscribed, member.regex, member.server_assignor):
            member.subscribed, member.regex, member.server_assignor = wanted
            if member.member_epoch != JOIN_EPOCH or member.assigned:
                group.group_epoch += 1
        if request.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        member.client_id, member.client_host = request.client_id, request.client_host

    # -- targets and reconciliation -------------------------------------------------------

    def _member_topics(self, member: ConsumerGroupMember) -> set[str]:
        topics = set(member.subscribed)
        if member.regex:
            pattern = _compile(member.regex)
            topics |= {
                t for t in self._topic_names() if not t.startswith("__") and pattern.fullmatch(t)
            }
        return topics

    def _refresh_target(self, group: ConsumerGroup, limits: ConsumerLimits) -> None:
        """Recompute the target when the group epoch moved or the subscribed topics changed."""
        wanted = {m.member_id: self._member_topics(m) for m in group.members.values()}
        topic_state = {}
        for name in sorted(set().union(*wanted.values())):
            found = self._topics(name)
            if found is not None:
                topic_state[name] = found
        if topic_state != group.topic_state:
            group.topic_state = topic_state
            if group.assignment_epoch == group.group_epoch:
                group.group_epoch += 1
        if group.assignment_epoch == group.group_epoch:
            return
        group.assignor = self._assignor(group, limits)
        subscriptions = {
            m: [topic_state[t][0] for t in sorted(ts) if t in topic_state]
            for m, ts in wanted.items()
        }
        counts = dict(topic_state.values())
        previous = {m: grouped(tps) for m, tps in group.target.items()}
        result = ASSIGNORS[group.assignor](subscriptions, counts, previous)
        group.target = {m: flat(result.get(m, {})) for m in group.members}
        group.assignment_epoch = group.group_epoch
        self.rebalances += 1
        log.info("rebalance: new target assignment", group=group.group_id, epoch=group.group_epoch,
                 assignor=group.assignor, members=len(group.members))  # fmt: skip

    @staticmethod
    def _assignor(group: ConsumerGroup, limits: ConsumerLimits) -> str:
        """The assignor most members ask for (Kafka's rule), else the configured default."""
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if not votes:
            return limits.assignors[0]
        return max(sorted(votes), key=lambda name: votes[name])

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: frozenset[TopicPartition] | None,
        now_ms: int,
    ) -> None:
        """Move the member towards its target as far as the other members' releases allow."""
        target = group.target.get(member.member_id, frozenset())
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                # Still holding them: anything more it must give up joins the revocation.
                extra = member.assigned - target
                member.assigned -= extra
                member.pending_revocation |= extra
                return
            member.pending_revocation = frozenset()
            member.state = MemberState.STABLE
        if (
            member.member_epoch == group.assignment_epoch
            and member.state is MemberState.STABLE
            and member.assigned == target
        ):
            return
        revoke = member.assigned - target
        if revoke:
            member.assigned -= revoke
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revoke_deadline_ms = now_ms + member.rebalance_timeout_ms
            return
        wanted = target - member.assigned
        if wanted:  # one pass over the others, not one per partition (large groups)
            held = group.held(exclude=member.member_id)
            member.assigned |= wanted - held
        if member.member_epoch != group.assignment_epoch:
            member.previous_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.state = (
            MemberState.STABLE if member.assigned == target else MemberState.UNRELEASED_PARTITIONS
        )

    @staticmethod
    def _to_send(member: ConsumerGroupMember, request: ConsumerHeartbeat) -> Assignment | None:
        """The assignment, when the client's view of it may differ from ours."""
        if (
            request.member_epoch == JOIN_EPOCH
            or member.sent != member.assigned
            or (request.owned is not None and request.owned != member.assigned)
        ):
            member.sent = member.assigned
            return grouped(member.assigned)
        return None

    # -- leaving ----------------------------------------------------------------------------

    def _leave(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"member {member_id} is not in the group"
            )
        if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Kept, with its partitions, until it returns or its session times out.
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.sent = None
            log.info("static consumer left for now", group=group_id, member=member_id,
                     client=member.client_id)  # fmt: skip
            return
        self._remove(group, member_id, "left")

    def _remove(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        member = group.members.pop(member_id)
        group.target.pop(member_id, None)
        group.group_epoch += 1
        log.info("consumer left", group=group.group_id, member=member_id,
                 client=member.client_id, reason=reason)  # fmt: skip

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove members whose session timed out, or that did not revoke partitions within
        their rebalance timeout (Kafka fences them); their partitions go to the others."""
        late = [
            (g, m.member_id, "session timeout" if m.deadline_ms <= now_ms else "rebalance timeout")
            for g in self.groups.values()
            for m in g.members.values()
            if m.deadline_ms <= now_ms
            or (m.state is MemberState.UNREVOKED_PARTITIONS and m.revoke_deadline_ms <= now_ms)
        ]
        for group, member_id, reason in late:
            self._remove(group, member_id, reason)
        return [(g.group_id, m) for g, m, _ in late]

    # -- for the offset store and the admin APIs -------------------------------------------

    def check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode | None:
        """An OffsetCommit's verdict (v9+: the generation is the member epoch); None when
        the group is not a consumer group of this coordinator."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if generation_id < 0 and not group.members:
            return ErrorCode.none  # the admin client, or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if group_instance_id is not None and member.instance_id != group_instance_id:
            return ErrorCode.fenced_instance_id
        if generation_id != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def list_groups(
        self, states: Collection[str] = (), types: Collection[str] = ()
    ) -> list[GroupListing]:
        """ListGroups' view (type and protocol type "consumer", as Kafka lists them); filters
        match case-insensitively, empty means all."""
        if types and GROUP_TYPE not in {t.lower() for t in types}:
            return []
        wanted = {s.lower() for s in states}
        return [
            GroupListing(g.group_id, g.state, GROUP_TYPE, GROUP_TYPE)
            for _, g in sorted(self.groups.items())
            if not wanted or g.state.lower() in wanted
        ]

    def counts_by_state(self) -> dict[str, int]:
        """Groups by state (Kafka's names). The metrics thread reads it while the loop may
        change a group: a count interrupted by a change is taken again."""
        for _ in range(3):
            counts = dict.fromkeys(("Empty", "Assigning", "Reconciling", "Stable"), 0)
            try:
                for g in list(self.groups.values()):
                    counts[g.state] += 1
            except RuntimeError:  # a dict changed size while it was read
                continue
            break
        return counts

    def delete_group(self, group_id: str) -> None:
        """:raises CoordinatorError: the group is unknown or still has members."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"no consumer group {group_id}")
        if group.members:
            raise CoordinatorError(
                ErrorCode.non_empty_group, f"consumer group {group_id} has members"
            )
        del self.groups[group_id]
