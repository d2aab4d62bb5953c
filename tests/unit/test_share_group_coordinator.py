"""ShareGroupCoordinator and the assignor, sans-IO with a fake clock."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from coordinator.assignor import assign
from coordinator.share_group import CoordinatorError
from coordinator.share_group import CoordinatorLimits
from coordinator.share_group import ShareGroupCoordinator

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


class Topics:
    def __init__(self) -> None:
        self.known = {"a": (T1, 3)}

    def __call__(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.known.get(name)


def make(**limits: int) -> tuple[ShareGroupCoordinator, Topics]:
    topics = Topics()
    return ShareGroupCoordinator(lambda group: CoordinatorLimits(**limits), topics), topics


def test_join_heartbeat_leave_and_epochs() -> None:
    c, _ = make()
    joined, _ = c.heartbeat("g", "m1", 0, ("a",), now_ms=0)
    assert joined.member_epoch == 1 and joined.assignment == {T1: (0, 1, 2)}
    same, _ = c.heartbeat("g", "m1", 1, None, now_ms=10)
    assert same.member_epoch == 1 and same.assignment is None  # unchanged: not resent
    second, _ = c.heartbeat("g", "m2", 0, ("a",), now_ms=20)
    first_again, _ = c.heartbeat("g", "m1", 1, None, now_ms=30)
    assert first_again.member_epoch == second.member_epoch > 1
    assert first_again.assignment is not None and second.assignment is not None
    assert sorted(first_again.assignment[T1] + second.assignment[T1]) == [0, 1, 2]
    left, departure = c.heartbeat("g", "m2", -1, None, now_ms=40)
    assert left.member_epoch == -1 and departure is not None and departure.reason == "left"
    assert not c.is_member("g", "m2")


@pytest.mark.parametrize(
    ("member", "epoch", "code"),
    [
        ("ghost", 1, ErrorCode.unknown_member_id),
        ("m1", 7, ErrorCode.fenced_member_epoch),
        ("", 0, ErrorCode.invalid_request),
    ],
)
def test_refusals_carry_kafkas_error_codes(member: str, epoch: int, code: ErrorCode) -> None:
    c, _ = make()
    c.heartbeat("g", "m1", 0, ("a",), now_ms=0)
    with pytest.raises(CoordinatorError) as e:
        c.heartbeat("g", member, epoch, None, now_ms=1)
    assert e.value.error_code == code


def test_a_fenced_member_rejoins_with_its_own_id() -> None:
    c, _ = make()
    c.heartbeat("g", "m1", 0, ("a",), now_ms=0)
    rejoined, _ = c.heartbeat("g", "m1", 0, ("a",), now_ms=5)
    assert rejoined.member_id == "m1" and rejoined.assignment == {T1: (0, 1, 2)}
    assert len(c.groups["g"].members) == 1


def test_group_size_limit() -> None:
    c, _ = make(max_size=2)
    c.heartbeat("g", "m1", 0, ("a",), now_ms=0)
    c.heartbeat("g", "m2", 0, ("a",), now_ms=0)
    with pytest.raises(CoordinatorError) as e:
        c.heartbeat("g", "m3", 0, ("a",), now_ms=0)
    assert e.value.error_code == ErrorCode.group_max_size_reached


def test_the_number_of_groups_is_not_limited() -> None:
    """group.share.max.groups (10) never refuses a group: Kafka sizes a cache with it."""
    c, _ = make()
    for i in range(1000):
        c.heartbeat(f"g{i}", "m", 0, ("a",), now_ms=0)
        c.heartbeat(f"g{i}", "m", -1, None, now_ms=1)  # leaves: the group stays, empty
    assert len(c.groups) == 1000


def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    c, _ = make(session_timeout_ms=1000)
    c.heartbeat("g", "m1", 0, ("a",), now_ms=0)
    c.heartbeat("g", "m2", 0, ("a",), now_ms=0)
    c.heartbeat("g", "m2", c.groups["g"].members["m2"].member_epoch, None, now_ms=900)
    assert c.expire(999) == []
    gone = c.expire(1000)
    assert [(d.member_id, d.reason) for d in gone] == [("m1", "session timeout")]
    assert c.is_member("g", "m2")


def test_a_topic_created_after_subscribing_is_picked_up() -> None:
    c, topics = make()
    joined, _ = c.heartbeat("g", "m1", 0, ("a", "later"), now_ms=0)
    assert joined.assignment == {T1: (0, 1, 2)}
    topics.known["later"] = (T2, 2)
    after, _ = c.heartbeat("g", "m1", joined.member_epoch, None, now_ms=10)
    assert after.assignment == {T1: (0, 1, 2), T2: (0, 1)}


def test_assignor_balances_and_shares() -> None:
    few = assign({"m1": [T1], "m2": [T1]}, {T1: 5})
    assert sorted(len(p[T1]) for p in few.values()) == [2, 3]
    assert sorted(x for p in few.values() for x in p[T1]) == [0, 1, 2, 3, 4]
    many = assign({f"m{i}": [T1] for i in range(7)}, {T1: 3})
    assert all(len(p[T1]) == 1 for p in many.values())  # everyone gets a partition
    assert {p[T1][0] for p in many.values()} == {0, 1, 2}  # every partition is assigned
    apart = assign({"m1": [T1], "m2": [T2]}, {T1: 2, T2: 1})
    assert apart == {"m1": {T1: (0, 1)}, "m2": {T2: (0,)}}
