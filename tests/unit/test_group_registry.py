"""GroupRegistry: which kind of group owns a group id, over the three real coordinators.

Kafka keeps every group in one map and refuses a request of another kind for an id a group of
one kind holds (`GroupMetadataManager.getOrMaybeCreateShareGroup` and its consumer twin throw
GroupIdNotFoundException "Group <id> is not a share group."; group-coordinator module).
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coordinator.consumer_group import ConsumerGroupCoordinator
from coordinator.consumer_group import ConsumerHeartbeat
from coordinator.consumer_group import ConsumerLimits
from coordinator.group_registry import GroupKind
from coordinator.group_registry import GroupRegistry
from coordinator.share_group import CoordinatorError
from coordinator.share_group import CoordinatorLimits
from coordinator.share_group import ShareGroupCoordinator
from tests.unit.classic_group_support import join_request
from tests.unit.classic_group_support import make as make_classic

TOPICS = {"a": (uuid.UUID(int=1), 2)}


class Wired:
    """The three coordinators registered as `broker/server.py` registers them."""

    def __init__(self, durable_shares: set[str] | None = None) -> None:
        self.durable_shares = durable_shares or set()
        self.groups = GroupRegistry()
        self.share = ShareGroupCoordinator(lambda _: CoordinatorLimits(), TOPICS.get)
        limits = ConsumerLimits(session_timeout_ms=1000)
        self.consumer = ConsumerGroupCoordinator(
            lambda _: limits,
            TOPICS.get,
            topic_names=lambda: list(TOPICS),
            other_kind=self.groups.taken_by_another(GroupKind.CONSUMER),
        )
        self.classic = make_classic()
        self.groups.register(GroupKind.SHARE, self.share, durable=lambda: self.durable_shares)
        self.groups.register(GroupKind.CONSUMER, self.consumer)
        self.groups.register(GroupKind.CLASSIC, self.classic)

    def consumer_join(self, group_id: str) -> None:
        self.consumer.heartbeat(group_id, "m" * 22, ConsumerHeartbeat(0, subscribed=("a",)), 0)


def test_each_kind_is_found_by_the_coordinator_that_holds_it() -> None:
    w = Wired()
    w.share.heartbeat("s", "m1", 0, ("a",), now_ms=0)
    w.consumer_join("c")
    w.classic.join(join_request(), 0)  # classic_group_support's group id: "g"
    assert w.groups.kind("s") is GroupKind.SHARE
    assert w.groups.kind("c") is GroupKind.CONSUMER
    assert w.groups.kind("g") is GroupKind.CLASSIC
    assert w.groups.kind("nobody") is None
    assert w.groups.other_kind(GroupKind.SHARE, "s") is None  # its own kind is no other
    assert w.groups.other_kind(GroupKind.CONSUMER, "s") is GroupKind.SHARE
    assert w.groups.other_kind(GroupKind.SHARE, "g") is GroupKind.CLASSIC
    assert w.groups.holds(GroupKind.CONSUMER, "c") and not w.groups.holds(GroupKind.SHARE, "c")
    assert w.groups.owner(GroupKind.CLASSIC) is w.classic


def test_a_consumer_heartbeat_is_refused_for_a_share_or_classic_groups_id() -> None:
    w = Wired()
    w.share.heartbeat("s", "m1", 0, ("a",), now_ms=0)
    w.classic.join(join_request(), 0)
    for taken in ("s", "g"):
        with pytest.raises(CoordinatorError) as e:
            w.consumer_join(taken)
        assert e.value.error_code is ErrorCode.group_id_not_found
    assert not w.consumer.has_group("s") and not w.consumer.has_group("g")


def test_a_share_group_known_only_from_disk_counts_when_asked_for() -> None:
    """After a restart a share group with recorded state has no members yet: JoinGroup and
    DescribeGroups ask with `durable`, heartbeats never do (it reads the share-state dir)."""
    w = Wired(durable_shares={"restarted"})
    assert w.groups.kind("restarted") is None
    assert w.groups.kind("restarted", durable=True) is GroupKind.SHARE
    assert w.groups.other_kind(GroupKind.CLASSIC, "restarted", durable=True) is GroupKind.SHARE
    assert w.groups.holds(GroupKind.SHARE, "restarted", durable=True)


def test_a_kind_has_one_coordinator() -> None:
    w = Wired()
    with pytest.raises(ValueError, match="already"):
        w.groups.register(GroupKind.SHARE, w.share)
