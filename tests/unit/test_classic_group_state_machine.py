"""ClassicGroupCoordinator driven by Hypothesis: clients that join, sync, heartbeat, leave and
go silent while time moves, against a model of what each client is waiting for.

The model holds the protocol's promises: every reply answers a request that is waiting, and
each at most once; no JoinGroup is left waiting once the join phase is over, and no SyncGroup
once the sync phase is; a successful JoinGroup carries the current generation and the leader
gets exactly the members; SyncGroup hands each member what the leader sent for it; a member
that left is gone; the group's structure stays consistent (states, leader, static members).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import invariant
from hypothesis.stateful import rule
from kio.schema.errors import ErrorCode

from coordinator.classic_group import ClassicGroup
from coordinator.classic_group import GroupState
from coordinator.classic_group import JoinResult
from coordinator.classic_group import Reply
from coordinator.classic_group import SyncResult
from coordinator.classic_group import Wait
from coordinator.share_group import CoordinatorError
from tests.hypothesis_profiles import examples
from tests.unit.classic_group_support import GROUP
from tests.unit.classic_group_support import join_request
from tests.unit.classic_group_support import make

CLIENTS = ("c0", "c1", "c2", "c3")
STATIC = {"c2": "i2", "c3": "i3"}  # static members
PROTOCOLS = (
    (("range", b"r"),),
    (("roundrobin", b"o"), ("range", b"r")),
)


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()
    protocols: int = 0


class ClassicGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.c = make(initial_delay_ms=500)
        self.now = 0
        self.clients = {name: Client() for name in CLIENTS}
        self.waiting: set[tuple[Wait, str]] = set()  # (what, member id)
        self.sent: dict[tuple[int, str], bytes] = {}  # (generation, member) -> assignment
        self.left: set[str] = set()
        self.generation = 0

    @property
    def group(self) -> ClassicGroup | None:
        return self.c.groups.get(GROUP)

    def _deliver(self, replies: list[Reply]) -> None:
        for r in replies:
            key = (r.wait, r.member_id)
            assert key in self.waiting, f"a reply nobody waits for: {r}"
            self.waiting.discard(key)
            if isinstance(r.result, JoinResult):
                self._joined(r.result)
            else:
                assert isinstance(r.result, SyncResult)
                self._synced(r.member_id, r.result)

    def _client(self, member_id: str) -> Client | None:
        return next((c for c in self.clients.values() if c.member_id == member_id), None)

    def _joined(self, result: JoinResult) -> None:
        client = self._client(result.member_id)
        if result.error is not ErrorCode.none or client is None:
            return
        group = self.group
        assert group is not None
        assert result.generation_id == group.generation_id
        client.generation = result.generation_id
        client.leader = result.leader == result.member_id
        if client.leader and not result.skip_assignment:
            assert {m for m, _, _ in result.members} == set(group.members)
            client.members = tuple(m for m, _, _ in result.members)

    def _synced(self, member_id: str, result: SyncResult) -> None:
        client = self._client(member_id)
        if result.error is ErrorCode.none and client is not None:
            expected = self.sent.get((client.generation, member_id))
            if expected is not None:
                assert result.assignment == expected

    @rule(name=st.sampled_from(CLIENTS), protocols=st.integers(0, len(PROTOCOLS) - 1))
    def join(self, name: str, protocols: int) -> None:
        client = self.clients[name]
        if (Wait.JOIN, client.member_id) in self.waiting and client.member_id:
            return  # a client waits for its answer before asking again
        req = join_request(
            client.member_id, instance=STATIC.get(name), protocols=PROTOCOLS[protocols]
        )
        try:
            member_id, replies = self.c.join(req, self.now)
        except CoordinatorError:
            return
        if member_id != client.member_id:  # a new id: the old one is the client's no more
            self.waiting = {(w, m) for w, m in self.waiting if m != client.member_id}
        client.member_id, client.protocols = member_id, protocols
        self.waiting.add((Wait.JOIN, member_id))
        self._deliver(replies)

    @rule(
        name=st.sampled_from(sorted(STATIC)),
        protocols=st.integers(0, len(PROTOCOLS) - 1),
        version=st.sampled_from([5, 9]),
    )
    def restart(self, name: str, protocols: int, version: int) -> None:
        """The static client restarts: no member id, its instance id. In a Stable group whose
        protocol stays it takes its place back at once, with its assignment, and nobody
        rejoins; a returning leader below v9 is told the old leader id (Kafka's
        `updateStaticMemberThenRebalanceOrCompleteJoin`)."""
        instance = STATIC[name]
        client, group = self.clients[name], self.group
        if group is None or group.static.get(instance) != client.member_id:
            return
        old, state, generation = client.member_id, group.state, group.generation_id
        previous_leader, same_protocols = group.leader, protocols == client.protocols
        req = join_request(instance=instance, protocols=PROTOCOLS[protocols], version=version)
        try:
            member_id, replies = self.c.join(req, self.now)
        except CoordinatorError:
            return
        assert member_id != old and group.static[instance] == member_id
        client.member_id, client.protocols = member_id, protocols
        self.waiting.add((Wait.JOIN, member_id))
        stays = state is GroupState.STABLE and group.state is GroupState.STABLE
        # The same protocols cannot change the group's protocol: no rebalance then.
        assert stays or not (state is GroupState.STABLE and same_protocols)
        if stays and (generation, old) in self.sent:
            self.sent[(generation, member_id)] = self.sent[(generation, old)]
        self._deliver(replies)
        self.waiting = {(w, m) for w, m in self.waiting if m != old}
        if not stays:
            return
        assert group.generation_id == generation
        assert all(not m.awaiting_join for m in group.members.values())
        result = next(r.result for r in replies if r.member_id == member_id)
        assert isinstance(result, JoinResult) and result.generation_id == generation
        if version < 9:
            assert result.leader == previous_leader and not result.skip_assignment
            assert result.members == ()
        else:
            assert result.skip_assignment == (previous_leader == old)

    @rule(name=st.sampled_from(CLIENTS), data=st.data())
    def sync(self, name: str, data: st.DataObject) -> None:
        client = self.clients[name]
        if not client.member_id or (Wait.SYNC, client.member_id) in self.waiting:
            return
        assignments = {}
        group = self.group
        # Only the leader's sync that completes the rebalance hands assignments out.
        deciding = group is not None and group.state is GroupState.COMPLETING_REBALANCE
        if client.leader:
            for m in client.members:
                assignments[m] = data.draw(st.binary(max_size=3))
                if deciding and client.generation == group.generation_id:  # type: ignore[union-attr]
                    self.sent[(client.generation, m)] = assignments[m]
        try:
            replies = self.c.sync(
                GROUP, client.member_id, client.generation, STATIC.get(name), assignments, self.now
            )
        except CoordinatorError:
            return
        self.waiting.add((Wait.SYNC, client.member_id))
        self._deliver(replies)

    @rule(name=st.sampled_from(CLIENTS))
    def heartbeat(self, name: str) -> None:
        client = self.clients[name]
        code = self.c.heartbeat(
            GROUP, client.member_id, client.generation, STATIC.get(name), self.now
        )
        group = self.group
        if code is ErrorCode.none:
            assert group is not None and client.member_id in group.members
            assert group.state is not GroupState.PREPARING_REBALANCE

    @rule(name=st.sampled_from(CLIENTS))
    def leave(self, name: str) -> None:
        client = self.clients[name]
        if not client.member_id or self.group is None:
            return
        codes, replies = self.c.leave(GROUP, [(client.member_id, STATIC.get(name))], self.now)
        self._deliver(replies)
        if codes == [ErrorCode.none]:
            self.left.add(client.member_id)
            self.waiting = {(w, m) for w, m in self.waiting if m != client.member_id}
            self.clients[name] = Client()

    @rule(ms=st.sampled_from([1, 100, 600, 5_000, 12_000, 31_000]))
    def advance(self, ms: int) -> None:
        self.now += ms
        self._deliver(self.c.tick(self.now))

    @invariant()
    def waiting_matches_the_phase(self) -> None:
        group = self.group
        if group is None:
            return
        joins = {m for w, m in self.waiting if w is Wait.JOIN and m in group.members}
        syncs = {m for w, m in self.waiting if w is Wait.SYNC and m in group.members}
        if group.state is not GroupState.PREPARING_REBALANCE:
            assert not joins, (group.state, joins)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            assert not syncs, (group.state, syncs)
        for m in group.members.values():
            assert not (m.awaiting_join and m.awaiting_sync)
            assert m.awaiting_join == ((Wait.JOIN, m.member_id) in self.waiting) or (
                group.state is GroupState.PREPARING_REBALANCE
            )

    @invariant()
    def structure_is_consistent(self) -> None:
        group = self.group
        if group is None:
            return
        assert group.generation_id >= self.generation
        self.generation = group.generation_id
        assert not (set(group.members) & self.left)
        if group.state is GroupState.EMPTY:
            assert not group.members
        if group.members:
            assert group.leader in group.members
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert group.protocol_name is not None
            assert all(group.protocol_name in m.protocol_names() for m in group.members.values())
        for instance, member_id in group.static.items():
            assert group.members[member_id].group_instance_id == instance


TestClassicGroupMachine = ClassicGroupMachine.TestCase
TestClassicGroupMachine.settings = settings(
    max_examples=examples(80),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
