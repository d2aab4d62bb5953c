"""Classic-protocol features the broker only relays or keeps, with librdkafka members:
static membership (`group.instance.id`: a restarted member takes its place back, with its
partitions and no rebalance for the others) and the cooperative-sticky assignor (a new member
gets partitions by incremental revocation: the others keep theirs meanwhile)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import ConsumerGroupState
from confluent_kafka import TopicPartition

from tests.brokers import BrokerProcess
from tests.compat.support import admin
from tests.compat.support import create_topic

pytestmark = pytest.mark.compat

CONFIG = {"group.initial.rebalance.delay.ms": 100}
SESSION_MS = 10_000


BROKER_CONFIG = CONFIG
BROKER_PER_TEST = True  # each test starts from an empty broker


class Member:
    """A librdkafka member in this process; its callbacks run inside `poll`."""

    def __init__(self, bootstrap: str, group: str, topic: str, **settings: Any) -> None:
        self.events: list[tuple[str, set[int]]] = []  # ("assign" | "revoke", partitions)
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
             "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500, "log_level": 0,
             **settings}
        )  # fmt: skip
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        self.events.append(("assign", {tp.partition for tp in partitions}))

    def _revoked(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        self.events.append(("revoke", {tp.partition for tp in partitions}))

    def held(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def revoked(self) -> list[set[int]]:
        return [ps for kind, ps in self.events if kind == "revoke"]


def _poll_until(members: list[Member], done: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, [m.held() for m in members]
        for m in members:
            m.consumer.poll(0.05)


def _split(members: list[Member], sizes: list[int], partitions: int) -> Callable[[], bool]:
    def done() -> bool:
        held = [m.held() for m in members]
        together = sorted(p for h in held for p in h)
        return [len(h) for h in held] == sizes and together == list(range(partitions))

    return done


@pytest.mark.parametrize("restarted", ["leader", "follower"])
def test_a_static_member_restarts_into_its_place_without_a_rebalance(
    broker: BrokerProcess, restarted: str
) -> None:
    """A static member that comes back under its `group.instance.id` with the same protocols
    takes its place back, leader or not, and the others are told of no rebalance (KIP-345).

    Kafka's `GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin`
    (group-coordinator/.../GroupMetadataManager.java): in a Stable group whose selected
    protocol would not change, the new member id replaces the old one and the current
    generation stands. A JoinGroup v9+ (KIP-814) gets the member list with SkipAssignment when
    it is the leader; an older one (librdkafka 2.16 sends v5) is answered with the *old*
    leader id and no members, so it acts as a follower and its SyncGroup returns the
    assignment it had."""
    b = broker.bootstrap
    create_topic(b, "static", 4)
    # alpha joins alone first, so it leads the group beta then joins.
    leader = Member(b, "statics", "static", **{"group.instance.id": "alpha"})
    _poll_until([leader], lambda: len(leader.held()) == 4)
    follower = Member(b, "statics", "static", **{"group.instance.id": "beta"})
    _poll_until([leader, follower], _split([leader, follower], [2, 2], 4))
    gone, stays = (leader, follower) if restarted == "leader" else (follower, leader)
    instance = "alpha" if gone is leader else "beta"
    held, events = gone.held(), list(stays.events)
    gone.consumer.close()  # a static member sends no LeaveGroup: its place is kept
    restarted_at = time.monotonic()
    again = Member(b, "statics", "static", **{"group.instance.id": instance})
    _poll_until([again, stays], lambda: again.held() == held)
    assert time.monotonic() - restarted_at < SESSION_MS / 1000  # not after an expiry
    for _ in range(20):  # the member that stayed is told of no rebalance
        stays.consumer.poll(0.05)
    assert stays.events == events  # no revocation, no new assignment
    assert stays.held() == {0, 1, 2, 3} - held
    assert again.revoked() == [] and again.events == [("assign", held)]
    client = admin(b)
    group = client.describe_consumer_groups(["statics"])["statics"].result(10)
    assert group.state == ConsumerGroupState.STABLE
    assert sorted(m.group_instance_id for m in group.members) == ["alpha", "beta"]
    for m in (again, stays):
        m.consumer.close()


def test_cooperative_sticky_moves_only_the_partitions_a_newcomer_gets(
    broker: BrokerProcess,
) -> None:
    b = broker.bootstrap
    create_topic(b, "sticky", 6)
    settings = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Member(b, "stickies", "sticky", **settings) for _ in range(2)]
    _poll_until(members, _split(members, [3, 3], 6))
    before = [m.held() for m in members]
    members.append(Member(b, "stickies", "sticky", **settings))
    _poll_until(members, _split(members, [2, 2, 2], 6))
    for m, kept in zip(members[:2], before, strict=True):
        # One partition given up each, incrementally; never everything at once.
        assert m.revoked() == [kept - m.held()] and len(m.revoked()[0]) == 1
        assert m.held() < kept
    assert members[2].revoked() == []
    client = admin(b)
    group = client.describe_consumer_groups(["stickies"])["stickies"].result(10)
    assert group.partition_assignor == "cooperative-sticky"
    for m in members:
        m.consumer.close()


def test_an_emptied_group_keeps_its_protocol_type(broker: BrokerProcess) -> None:
    """Kafka keeps a classic group's protocol type once its last member has left: only the
    protocol name is cleared when the next generation has no members (`ClassicGroup
    .initNextGeneration` in group-coordinator/.../classic/ClassicGroup.java), so tools still see
    an Empty "consumer" group, not a simple one ("")."""
    b = broker.bootstrap
    create_topic(b, "emptied", 2)
    member = Member(b, "emptied-group", "emptied")
    _poll_until([member], lambda: len(member.held()) == 2)
    member.consumer.close()  # LeaveGroup: the group rebalances to no members, Empty
    client = admin(b)
    deadline = time.monotonic() + 10
    while True:
        group = client.describe_consumer_groups(["emptied-group"])["emptied-group"].result(10)
        if group.state == ConsumerGroupState.EMPTY or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert group.state == ConsumerGroupState.EMPTY
    assert not group.is_simple_consumer_group
    listed = client.list_consumer_groups().result(10)
    [listing] = [g for g in listed.valid if g.group_id == "emptied-group"]
    assert not listing.is_simple_consumer_group
