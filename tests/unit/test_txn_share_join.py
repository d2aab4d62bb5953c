"""A share-partition leader's join of a transaction coordinated elsewhere
(`TxnShareAcks.guard`/`join`/`joined`, `broker/txn_share_remote.py`): as Kafka's
`VerificationGuard`, a marker of the producer that arrives while the coordinator is asked
voids the join, since the transaction it was joining may have ended; a marker also ends a join.
"""

from __future__ import annotations

from typing import Any

from broker.share.txn_acks import TxnShareAcks

PID, EPOCH, TP = 7, 3, ("in", 0)


def _acks() -> TxnShareAcks:
    manager: Any = None  # never reached: nothing is staged here
    return TxnShareAcks(manager)


def test_a_join_is_recorded_for_its_epoch_only() -> None:
    acks = _acks()
    assert acks.join(PID, EPOCH, acks.guard(PID))
    assert acks.joined(PID, EPOCH) and not acks.joined(PID, EPOCH + 1)


def test_a_marker_while_the_coordinator_is_asked_voids_the_join() -> None:
    acks = _acks()
    guard = acks.guard(PID)
    assert acks.end(TP, PID, False, 0)  # the transaction aborted meanwhile
    assert not acks.join(PID, EPOCH, guard)
    assert not acks.joined(PID, EPOCH)


def test_another_producers_marker_does_not() -> None:
    acks = _acks()
    guard = acks.guard(PID)
    assert acks.end(TP, PID + 1, True, 0)
    assert acks.join(PID, EPOCH, guard)


def test_a_marker_ends_the_join_and_a_refused_join_records_nothing() -> None:
    acks = _acks()
    assert acks.join(PID, EPOCH, acks.guard(PID))
    assert acks.end(TP, PID, True, 0)
    assert not acks.joined(PID, EPOCH)
    acks.guard(PID)
    assert not acks.join(PID, EPOCH, None)  # the coordinator refused: nothing recorded
    assert not acks.joined(PID, EPOCH)


def test_two_askers_at_once_each_see_the_marker() -> None:
    acks = _acks()
    first, second = acks.guard(PID), acks.guard(PID)
    assert acks.join(PID, EPOCH, first)
    assert acks.end(TP, PID, False, 0)
    assert not acks.join(PID, EPOCH, second)
    assert not acks.joined(PID, EPOCH)
