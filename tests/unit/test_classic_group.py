"""The classic group coordinator, rule by rule, under a clock passed in."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from coordinator.classic_group import ClassicGroupCoordinator
from coordinator.classic_group import GroupState
from coordinator.classic_member import Protocols
from coordinator.share_group import CoordinatorError
from tests.unit.classic_group_support import GROUP
from tests.unit.classic_group_support import RANGE
from tests.unit.classic_group_support import REBALANCE_MS
from tests.unit.classic_group_support import SESSION_MS
from tests.unit.classic_group_support import join_request
from tests.unit.classic_group_support import joins
from tests.unit.classic_group_support import make
from tests.unit.classic_group_support import new_member
from tests.unit.classic_group_support import syncs


def _stable_pair() -> tuple[ClassicGroupCoordinator, str, str]:
    """Two members, generation 1, Stable, with assignments b"A" and b"B"."""
    c = make()
    a, r = new_member(c, 0)
    assert joins(r)[a].generation_id == 1  # alone and no initial delay: done at once
    assert c.sync(GROUP, a, 1, None, {a: b"A"}, 0)
    b, r = new_member(c, 0)
    assert r == []  # waits: a must rejoin
    assert c.heartbeat(GROUP, a, 1, None, 0) is ErrorCode.rebalance_in_progress
    done = joins(c.join(join_request(a), 0)[1])
    assert set(done) == {a, b} and done[a].generation_id == 2
    assert c.sync(GROUP, b, 2, None, {}, 0) == []  # waits for the leader
    got = syncs(c.sync(GROUP, a, 2, None, {a: b"A", b: b"B"}, 0))
    assert got[a].assignment == b"A" and got[b].assignment == b"B"
    return c, a, b


def test_v4_join_asks_for_a_member_id_first_and_v3_does_not() -> None:
    c = make()
    member_id, replies = c.join(join_request(version=4), 0)
    assert joins(replies)[member_id].error is ErrorCode.member_id_required
    assert c.groups[GROUP].members == {}
    member_id, replies = c.join(join_request(version=3), 0)
    assert joins(replies)[member_id].error is ErrorCode.none
    assert member_id in c.groups[GROUP].members


def test_the_leader_gets_the_members_and_the_others_do_not() -> None:
    c = make()
    a, _ = new_member(c, 0)
    c.sync(GROUP, a, 1, None, {}, 0)
    b, _ = new_member(c, 0)
    done = joins(c.join(join_request(a), 0)[1])
    assert done[a].leader == a == done[b].leader
    assert {m for m, _, _ in done[a].members} == {a, b}
    assert done[b].members == ()
    assert done[a].protocol_name == "range"


def test_rebalance_relays_the_leaders_assignments() -> None:
    c, _, b = _stable_pair()
    group = c.groups[GROUP]
    assert group.state is GroupState.STABLE
    assert group.members[b].assignment == b"B"


def test_protocol_is_one_every_member_supports() -> None:
    c = make()
    a, _ = new_member(c, 0, protocols=(("roundrobin", b""), ("range", b"")))
    new_member(c, 0, protocols=(("range", b""), ("cooperative-sticky", b"")))
    done = joins(c.join(join_request(a, protocols=(("roundrobin", b""), ("range", b""))), 0)[1])
    assert done[a].protocol_name == "range"
    with pytest.raises(CoordinatorError) as e:
        c.join(join_request(protocols=(("sticky", b""),)), 0)
    assert e.value.error_code is ErrorCode.inconsistent_group_protocol
    with pytest.raises(CoordinatorError) as e:
        c.join(join_request(protocol_type="connect"), 0)
    assert e.value.error_code is ErrorCode.inconsistent_group_protocol


def test_session_timeout_removes_a_member_and_rebalances() -> None:
    c, a, b = _stable_pair()
    assert c.heartbeat(GROUP, a, 2, None, SESSION_MS - 1) is ErrorCode.none
    assert c.tick(SESSION_MS) == []  # b's session ended: removed, a is asked to rejoin
    group = c.groups[GROUP]
    assert set(group.members) == {a}
    assert group.state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat(GROUP, b, 2, None, SESSION_MS) is ErrorCode.unknown_member_id
    done = joins(c.join(join_request(a), SESSION_MS + 1)[1])
    assert done[a].generation_id == 3 and [m for m, _, _ in done[a].members] == [a]


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    c, a, b = _stable_pair()
    c.join(join_request(b, protocols=(("range", b"new"),)), 100)  # b's metadata changed
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    for now in range(5_000, REBALANCE_MS, 5_000):  # a heartbeats but never rejoins
        assert c.heartbeat(GROUP, a, 2, None, now) is ErrorCode.rebalance_in_progress
        assert c.tick(now) == []
    assert c.tick(100 + REBALANCE_MS - 1) == []
    done = joins(c.tick(100 + REBALANCE_MS))
    assert set(done) == {b}
    assert set(c.groups[GROUP].members) == {b}


def test_initial_delay_gathers_members_before_the_first_generation() -> None:
    c = make(initial_delay_ms=3000)
    a, r = new_member(c, 0)
    assert r == []
    b, r = new_member(c, 1000)
    assert r == []  # the delay starts again: ends at 4000
    assert c.tick(3999) == []
    done = joins(c.tick(4000))
    assert set(done) == {a, b} and done[a].generation_id == 1


def test_leave_group_rebalances_and_the_last_leave_empties_the_group() -> None:
    c, a, b = _stable_pair()
    codes, _ = c.leave(GROUP, [(b, None), ("ghost", None)], 0)
    assert codes == [ErrorCode.none, ErrorCode.unknown_member_id]
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    codes, _ = c.leave(GROUP, [(a, None)], 0)
    group = c.groups[GROUP]
    assert codes == [ErrorCode.none] and group.state is GroupState.EMPTY and not group.members


def test_sync_and_heartbeat_check_the_generation() -> None:
    c, a, _ = _stable_pair()
    assert c.heartbeat(GROUP, a, 1, None, 0) is ErrorCode.illegal_generation
    with pytest.raises(CoordinatorError) as e:
        c.sync(GROUP, a, 1, None, {}, 0)
    assert e.value.error_code is ErrorCode.illegal_generation
    assert syncs(c.sync(GROUP, a, 2, None, {}, 0))[a].assignment == b"A"  # Stable: at once


def test_a_rejoin_during_sync_aborts_the_waiting_syncs() -> None:
    c = make()
    a, _ = new_member(c, 0)
    c.sync(GROUP, a, 1, None, {}, 0)
    b, _ = new_member(c, 0)
    c.join(join_request(a), 0)
    assert c.sync(GROUP, b, 2, None, {}, 0) == []
    replies = c.join(join_request(a, protocols=(("range", b"changed"),)), 0)[1]
    assert syncs(replies)[b].error is ErrorCode.rebalance_in_progress


def test_static_member_rejoins_without_a_rebalance_and_fences_the_old_id() -> None:
    c = make()
    a, _ = c.join(join_request(instance="i-a"), 0)
    c.sync(GROUP, a, 1, None, {a: b"A"}, 0)
    b, _ = c.join(join_request(instance="i-b"), 0)
    c.join(join_request(a, instance="i-a"), 0)
    c.sync(GROUP, a, 2, "i-a", {a: b"A", b: b"B"}, 0)
    # b restarts: a new id, same instance id, the same assignment, no new generation.
    b2, replies = c.join(join_request(instance="i-b"), 1000)
    result = joins(replies)[b2]
    assert result.generation_id == 2 and result.error is ErrorCode.none
    assert c.groups[GROUP].state is GroupState.STABLE
    assert syncs(c.sync(GROUP, b2, 2, "i-b", {}, 1000))[b2].assignment == b"B"
    assert c.heartbeat(GROUP, b, 2, "i-b", 1000) is ErrorCode.fenced_instance_id
    assert c.check_commit(GROUP, b, 2, "i-b") is ErrorCode.fenced_instance_id


def _static_pair(
    a_protocols: Protocols = RANGE, b_protocols: Protocols = RANGE
) -> tuple[ClassicGroupCoordinator, str, str]:
    """Static members a (instance i-a, the leader) and b (i-b), Stable at generation 2 with
    assignments b"A" and b"B"."""
    c = make()
    a, _ = c.join(join_request(instance="i-a", protocols=a_protocols), 0)
    c.sync(GROUP, a, 1, "i-a", {a: b"A"}, 0)
    b, _ = c.join(join_request(instance="i-b", protocols=b_protocols), 0)
    c.join(join_request(a, instance="i-a", protocols=a_protocols), 0)
    c.sync(GROUP, a, 2, "i-a", {a: b"A", b: b"B"}, 0)
    assert c.groups[GROUP].state is GroupState.STABLE
    return c, a, b


def test_a_static_leader_rejoining_on_an_old_version_syncs_as_a_follower() -> None:
    """Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`: below JoinGroup v9 the
    returning leader gets the old leader id and no members; no rebalance."""
    c, a, b = _static_pair()
    a2, replies = c.join(join_request(instance="i-a", version=5), 10)
    result = joins(replies)[a2]
    assert (result.generation_id, result.leader, result.members) == (2, a, ())
    assert not result.skip_assignment and result.protocol_name == "range"
    group = c.groups[GROUP]
    assert group.state is GroupState.STABLE and group.leader == a2
    assert syncs(c.sync(GROUP, a2, 2, "i-a", {}, 10))[a2].assignment == b"A"
    assert c.heartbeat(GROUP, b, 2, "i-b", 10) is ErrorCode.none  # b is not asked to rejoin
    assert c.heartbeat(GROUP, a, 2, "i-a", 10) is ErrorCode.fenced_instance_id


def test_a_static_leader_rejoining_on_v9_skips_the_assignment() -> None:
    """KIP-814: the leader keeps the generation, gets the members and SkipAssignment."""
    c, _, b = _static_pair()
    a2, replies = c.join(join_request(instance="i-a", version=9), 10)
    result = joins(replies)[a2]
    assert result.skip_assignment and result.generation_id == 2 and result.leader == a2
    assert {m for m, _, _ in result.members} == {a2, b}
    assert syncs(c.sync(GROUP, a2, 2, "i-a", {}, 10))[a2].assignment == b"A"
    assert c.heartbeat(GROUP, b, 2, "i-b", 10) is ErrorCode.none


def test_a_static_member_that_changes_the_protocol_rebalances() -> None:
    both = (("roundrobin", b""), ("range", b""))
    c, _, _ = _static_pair(a_protocols=both, b_protocols=both[::-1])
    assert c.groups[GROUP].protocol_name == "range"  # one vote each: the first by name
    b2, replies = c.join(join_request(instance="i-b", protocols=both), 10)
    assert replies == []  # the selected protocol would change: everyone rejoins
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat(GROUP, b2, 2, "i-b", 10) is ErrorCode.rebalance_in_progress


def test_a_static_member_back_while_the_leader_assigns_rebalances() -> None:
    """CompletingRebalance: the leader may be assigning to the old id, so a new round."""
    c, a, b = _static_pair()
    c.join(join_request(a, instance="i-a", protocols=(("range", b"new"),)), 10)
    c.join(join_request(b, instance="i-b"), 10)
    assert c.groups[GROUP].state is GroupState.COMPLETING_REBALANCE
    c.join(join_request(instance="i-b"), 20)
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE


def test_session_timeout_bounds_and_group_max_size() -> None:
    c = make(max_size=1)
    with pytest.raises(CoordinatorError) as e:
        c.join(join_request(session_ms=10), 0)
    assert e.value.error_code is ErrorCode.invalid_session_timeout
    new_member(c, 0)
    with pytest.raises(CoordinatorError) as e:
        c.join(join_request(), 0)
    assert e.value.error_code is ErrorCode.group_max_size_reached


def test_check_commit_follows_kafkas_rules() -> None:
    c = make()
    assert c.check_commit(GROUP, "", -1, None) is None  # not a group this coordinator knows
    c2, a, _ = _stable_pair()
    assert c2.check_commit(GROUP, a, 2, None) is ErrorCode.none
    assert c2.check_commit(GROUP, a, 1, None) is ErrorCode.illegal_generation
    assert c2.check_commit(GROUP, "x", 2, None) is ErrorCode.unknown_member_id
    assert c2.check_commit(GROUP, "", -1, None) is ErrorCode.unknown_member_id
    c2.join(join_request(a, protocols=(("range", b"changed"),)), 0)
    assert c2.check_commit(GROUP, a, 2, None) is ErrorCode.none  # PreparingRebalance: allowed
    c2.join(join_request(list(c2.groups[GROUP].members)[1]), 0)
    assert c2.check_commit(GROUP, a, 3, None) is ErrorCode.rebalance_in_progress
    c2.leave(GROUP, [(m, None) for m in list(c2.groups[GROUP].members)], 0)
    assert c2.check_commit(GROUP, "", -1, None) is ErrorCode.none  # Empty: simple commits


def test_delete_only_an_empty_group() -> None:
    c, a, b = _stable_pair()
    with pytest.raises(CoordinatorError) as e:
        c.delete_group(GROUP)
    assert e.value.error_code is ErrorCode.non_empty_group
    c.leave(GROUP, [(a, None), (b, None)], 0)
    c.delete_group(GROUP)
    assert not c.has_group(GROUP)


def test_ids_handed_out_and_never_used_leave_no_group_behind() -> None:
    c = make()
    with pytest.raises(CoordinatorError) as e:
        c.join(join_request("made-up"), 0)  # an unknown member of an unknown group
    assert e.value.error_code is ErrorCode.unknown_member_id
    assert not c.has_group(GROUP)
    c.join(join_request(), 0)  # MEMBER_ID_REQUIRED, and nobody comes back
    assert c.has_group(GROUP)
    c.tick(SESSION_MS)
    assert not c.has_group(GROUP)
