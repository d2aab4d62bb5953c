"""ConsumerGroupCoordinator (KIP-848) and its assignors, sans-IO with times passed in."""

from __future__ import annotations

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from coordinator.consumer_assignors import parse_assignors
from coordinator.consumer_assignors import range_
from coordinator.consumer_assignors import uniform
from coordinator.consumer_group import ConsumerGroupCoordinator
from coordinator.consumer_group import ConsumerHeartbeat
from coordinator.consumer_group import ConsumerLimits
from coordinator.consumer_group import TopicPartition
from coordinator.consumer_group import flat
from coordinator.share_group import CoordinatorError

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def make(
    assignors: tuple[str, ...] = ("uniform", "range"), shares: set[str] | None = None
) -> ConsumerGroupCoordinator:
    topics = {"a": (A, 4), "b": (B, 2)}
    limits = ConsumerLimits(session_timeout_ms=1000, assignors=assignors)
    return ConsumerGroupCoordinator(
        lambda _: limits,
        topics.get,
        topic_names=lambda: list(topics),
        other_kind=lambda g: g in (shares or set()),
    )


def join(c: ConsumerGroupCoordinator, member: str, now: int = 0, **kw: object) -> set[int]:
    r = c.heartbeat("g", member, ConsumerHeartbeat(0, subscribed=("a",), **kw), now)  # type: ignore[arg-type]
    assert r.assignment is not None
    return set(r.assignment.get(A, ()))


def beat(
    c: ConsumerGroupCoordinator, member: str, epoch: int, owned: set[int] | None, now: int = 0
) -> tuple[int, set[int] | None]:
    tps: frozenset[TopicPartition] | None = (
        None if owned is None else frozenset((A, p) for p in owned)
    )
    r = c.heartbeat("g", member, ConsumerHeartbeat(epoch, owned=tps), now)
    return r.member_epoch, None if r.assignment is None else set(r.assignment.get(A, ()))


def test_a_partition_moves_only_after_its_owner_released_it() -> None:
    c = make()
    assert join(c, "m1") == {0, 1, 2, 3}
    assert c.groups["g"].members["m1"].member_epoch == 1
    assert join(c, "m2") == set()  # all four still held by m1
    assert c.groups["g"].state == "Reconciling"
    epoch, assignment = beat(c, "m1", 1, None)
    assert epoch == 1 and assignment is not None and len(assignment) == 2  # revoke, same epoch
    assert beat(c, "m2", 2, set()) == (2, None)  # nothing released yet
    epoch, _ = beat(c, "m1", 1, {0, 1, 2, 3})  # still owns them: still waiting
    assert epoch == 1
    assert beat(c, "m1", 1, assignment) == (2, None)  # released: the new epoch
    epoch, got = beat(c, "m2", 2, set())
    assert got == {0, 1, 2, 3} - assignment
    assert beat(c, "m2", 2, got)[0] == 2 and c.groups["g"].state == "Stable"


@pytest.mark.parametrize(
    ("member", "epoch", "code"),
    [
        ("ghost", 1, ErrorCode.unknown_member_id),
        ("m1", 5, ErrorCode.fenced_member_epoch),
        ("", 1, ErrorCode.invalid_request),
    ],
)
def test_refusals_carry_kafkas_error_codes(member: str, epoch: int, code: ErrorCode) -> None:
    c = make()
    join(c, "m1")
    with pytest.raises(CoordinatorError) as e:
        c.heartbeat("g", member, ConsumerHeartbeat(epoch), 0)
    assert e.value.error_code == code


def test_a_lost_response_is_forgiven_only_with_owned_partitions_within_the_assignment() -> None:
    c = make()
    join(c, "m1")
    join(c, "m2")
    beat(c, "m1", 1, None)  # revocation
    epoch, assignment = beat(c, "m1", 1, {0, 1})  # released: epoch 2, answer lost
    assert epoch == 2 and assignment is None
    assert beat(c, "m1", 1, {0, 1})[0] == 2  # the previous epoch, owning no more: accepted
    with pytest.raises(CoordinatorError) as e:
        beat(c, "m1", 1, None)  # without its owned partitions: fenced
    assert e.value.error_code == ErrorCode.fenced_member_epoch


def test_leaving_and_session_timeout_free_partitions() -> None:
    c = make()
    join(c, "m1", now=0)
    join(c, "m2", now=0)
    c.heartbeat("g", "m2", ConsumerHeartbeat(-1), 10)
    assert "m2" not in c.groups["g"].members
    join(c, "m3", now=500)
    assert c.expire(1000) == [("g", "m1")]  # m1's session ended at 1000
    assert beat(c, "m3", c.groups["g"].members["m3"].member_epoch, set(), 1001)[1] == {0, 1, 2, 3}


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_removed() -> None:
    c = make()
    join(c, "m1", rebalance_timeout_ms=100)
    join(c, "m2")
    beat(c, "m1", 1, None, now=10)  # told to revoke by 110
    beat(c, "m2", 2, set(), now=50)
    assert c.expire(109) == []
    assert c.expire(110) == [("g", "m1")]


def test_static_member_keeps_its_partitions_across_a_restart() -> None:
    c = make()
    assert join(c, "old", instance_id="i1") == {0, 1, 2, 3}
    with pytest.raises(CoordinatorError) as e:
        join(c, "other", instance_id="i1")
    assert e.value.error_code == ErrorCode.unreleased_instance_id
    assert c.heartbeat("g", "old", ConsumerHeartbeat(-2), 0).member_epoch == -2
    assert c.groups["g"].members["old"].assigned  # held while it restarts
    assert join(c, "new", instance_id="i1") == {0, 1, 2, 3}
    assert set(c.groups["g"].members) == {"new"} and c.groups["g"].group_epoch == 1


def test_check_commit_uses_the_member_epoch() -> None:
    c = make()
    assert c.check_commit("g", "", -1, None) is None  # not a group of this coordinator
    join(c, "m1")
    assert c.check_commit("g", "m1", 1, None) == ErrorCode.none
    assert c.check_commit("g", "m1", 0, None) == ErrorCode.stale_member_epoch
    assert c.check_commit("g", "ghost", 1, None) == ErrorCode.unknown_member_id
    assert c.check_commit("g", "", -1, None) == ErrorCode.unknown_member_id
    assert c.check_commit("g", "m1", 1, "i9") == ErrorCode.fenced_instance_id
    c.heartbeat("g", "m1", ConsumerHeartbeat(-1), 0)
    assert c.check_commit("g", "", -1, None) == ErrorCode.none  # empty: simple commits
    assert c.has_group("g") and not c.has_group("h")


def test_group_kinds_assignors_and_regex() -> None:
    c = make(shares={"s"})
    with pytest.raises(CoordinatorError) as e:
        c.heartbeat("s", "m", ConsumerHeartbeat(0, subscribed=("a",)), 0)
    assert e.value.error_code == ErrorCode.group_id_not_found
    with pytest.raises(CoordinatorError) as e:
        join(c, "m1", server_assignor="sticky")
    assert e.value.error_code == ErrorCode.unsupported_assignor
    with pytest.raises(CoordinatorError) as e:
        c.heartbeat("g", "m1", ConsumerHeartbeat(0, regex="(unclosed"), 0)
    assert e.value.error_code == ErrorCode.invalid_regular_expression
    r = c.heartbeat("g", "m1", ConsumerHeartbeat(0, regex="a|b", server_assignor="range"), 0)
    assert r.assignment == {A: (0, 1, 2, 3), B: (0, 1)}
    assert c.groups["g"].assignor == "range"
    assert [g.group_type for g in c.list_groups()] == ["consumer"]
    assert c.list_groups(types=("share",)) == [] and c.list_groups(states=("empty",)) == []


def test_assignors() -> None:
    subs = {"m1": [A], "m2": [A], "m3": [A, B]}
    counts = {A: 4, B: 2}
    assert range_(subs, counts, {}) == {
        "m1": {A: (0, 1)},
        "m2": {A: (2,)},
        "m3": {A: (3,), B: (0, 1)},
    }
    spread = uniform(subs, counts, {})
    assert sorted(len(flat(a)) for a in spread.values()) == [2, 2, 2]
    previous = {"m1": {A: (0, 1, 2, 3)}}
    sticky = uniform({"m1": [A], "m2": [A]}, {A: 4}, previous)
    assert flat(sticky["m1"]) <= flat(previous["m1"]) and len(flat(sticky["m1"])) == 2
    assert parse_assignors("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == (
        "range",
    )
    with pytest.raises(ValueError, match="unknown assignor"):
        parse_assignors("cooperative-sticky")


def test_consumer_group_configs_are_bounded_as_kafka_does() -> None:
    assert BrokerConfig().group_consumer_session_timeout_ms == 45_000
    with pytest.raises(ValueError, match=r"group\.consumer\.session\.timeout\.ms="):
        BrokerConfig(group_consumer_session_timeout_ms=3000)
    with pytest.raises(ValueError, match="below"):
        BrokerConfig(
            group_consumer_min_session_timeout_ms=1000,
            group_consumer_session_timeout_ms=5000,
            group_consumer_heartbeat_interval_ms=5000,
        )


def test_a_backtracking_regex_does_not_stall_the_heartbeat() -> None:
    """RE2 matches in linear time; Python's re takes seconds on this (2^26 paths)."""
    slow_name = "a" * 26 + "!"
    c = ConsumerGroupCoordinator(
        lambda _: ConsumerLimits(), {slow_name: (A, 1)}.get, topic_names=lambda: [slow_name]
    )
    started = time.monotonic()
    r = c.heartbeat("g", "m1", ConsumerHeartbeat(0, regex="(a+)+"), 0)
    assert time.monotonic() - started < 1.0
    assert r.assignment == {}
