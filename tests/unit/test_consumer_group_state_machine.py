"""A Hypothesis machine drives ConsumerGroupCoordinator with simulated clients.

Each client keeps what it believes it owns (the last assignment it received) and drops
everything when fenced, as librdkafka does. Responses may be lost, owned partitions may or may
not be reported, members join, leave, time out, and partitions are added. Invariants:
- no partition is held (assigned or pending revocation) by two members at once;
- what a client believes it owns is held for it by the coordinator while it is a member, so a
  partition never reaches a new owner before its previous owner released it;
- after every client heartbeats a few rounds, reporting what it owns, the group is Stable and
  the model's expectation holds: every subscribed partition owned by exactly one member,
  balanced within one partition (uniform).
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from dataclasses import field

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import initialize
from hypothesis.stateful import invariant
from hypothesis.stateful import rule

from coordinator.consumer_group import ConsumerGroupCoordinator
from coordinator.consumer_group import ConsumerHeartbeat
from coordinator.consumer_group import ConsumerLimits
from coordinator.consumer_group import TopicPartition
from coordinator.consumer_group import flat
from coordinator.share_group import CoordinatorError
from tests.hypothesis_profiles import examples

MEMBERS = ("m1", "m2", "m3")
TOPIC = uuid.UUID(int=1)
SESSION_MS, REBALANCE_MS = 45_000, 20_000


@dataclass
class Client:
    member_id: str
    joined: bool = False
    epoch: int = 0
    owned: frozenset[TopicPartition] = field(default_factory=frozenset)

    def drop(self) -> None:
        self.joined, self.epoch, self.owned = False, 0, frozenset()


class ConsumerGroupMachine(RuleBasedStateMachine):
    @initialize(partitions=st.integers(1, 6), assignor=st.sampled_from(["uniform", "range"]))
    def start(self, partitions: int, assignor: str) -> None:
        self.partitions = partitions
        self.now = 0
        limits = ConsumerLimits(session_timeout_ms=SESSION_MS, assignors=(assignor,))
        self.c = ConsumerGroupCoordinator(
            lambda _: limits, lambda name: (TOPIC, self.partitions) if name == "a" else None
        )
        self.clients = {m: Client(m) for m in MEMBERS}

    def _send(self, client: Client, epoch: int, report: bool, lost: bool) -> None:
        request = ConsumerHeartbeat(
            member_epoch=epoch,
            subscribed=("a",) if epoch == 0 else None,
            rebalance_timeout_ms=REBALANCE_MS if epoch == 0 else -1,
            owned=client.owned if report or epoch == 0 else None,
        )
        try:
            result = self.c.heartbeat("g", client.member_id, request, self.now)
        except CoordinatorError:
            client.drop()  # fenced or unknown: the client gives everything up and rejoins
            return
        if lost:
            return
        client.joined, client.epoch = True, result.member_epoch
        if result.assignment is not None:
            client.owned = flat(result.assignment)

    @rule(member=st.sampled_from(MEMBERS), lost=st.booleans())
    def join(self, member: str, lost: bool) -> None:
        client = self.clients[member]
        if not client.joined:
            self._send(client, 0, True, lost)

    @rule(member=st.sampled_from(MEMBERS), report=st.booleans(), lost=st.booleans())
    def heartbeat(self, member: str, report: bool, lost: bool) -> None:
        client = self.clients[member]
        if client.joined:
            self._send(client, client.epoch, report, lost)

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        client = self.clients[member]
        if client.joined:
            client.drop()  # it stops consuming before it says so
            with contextlib.suppress(CoordinatorError):  # already expired
                self.c.heartbeat("g", member, ConsumerHeartbeat(member_epoch=-1), self.now)

    @rule(ms=st.sampled_from([100, 5_000, REBALANCE_MS, SESSION_MS]))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.c.expire(self.now)

    @rule(more=st.integers(1, 3))
    def add_partitions(self, more: int) -> None:
        self.partitions = min(self.partitions + more, 12)

    @rule()
    def settle(self) -> None:
        """Everyone heartbeats, reporting what it owns, until the group is Stable. A client
        whose join response was lost joins again (the coordinator still counts it)."""
        group = self.c.groups.get("g")
        for _ in range(4):
            for client in self.clients.values():
                if client.joined:
                    self._send(client, client.epoch, True, False)
                elif group is not None and client.member_id in group.members:
                    self._send(client, 0, True, False)
        if group is None or not group.members:
            return
        assert group.state == "Stable"
        owners = [tp for m in group.members.values() for tp in m.assigned]
        assert sorted(owners) == [(TOPIC, p) for p in range(self.partitions)]
        counts = [len(m.assigned) for m in group.members.values()]
        assert max(counts) - min(counts) <= 1
        for client in self.clients.values():
            if client.joined:
                assert client.owned == group.members[client.member_id].assigned

    @invariant()
    def no_partition_has_two_holders(self) -> None:
        group = self.c.groups.get("g")
        if group is None:
            return
        held = [tp for m in group.members.values() for tp in m.assigned | m.pending_revocation]
        assert len(held) == len(set(held))

    @invariant()
    def no_two_members_consume_a_partition(self) -> None:
        group = self.c.groups.get("g")
        members = group.members if group else {}
        owned = [tp for c in self.clients.values() if c.member_id in members for tp in c.owned]
        assert len(owned) == len(set(owned))

    @invariant()
    def what_a_member_owns_is_held_for_it(self) -> None:
        group = self.c.groups.get("g")
        for client in self.clients.values():
            member = group.members.get(client.member_id) if group else None
            if member is not None and client.joined:
                assert client.owned <= member.assigned | member.pending_revocation


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=examples(100), stateful_step_count=30, deadline=None
)
TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
