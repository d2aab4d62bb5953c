"""AcquisitionLockTimer: one heap of deadlines for every share-partition of the broker."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.share.acquisition_lock_timer import AcquisitionLockTimer


def test_pop_due_returns_due_keys_earliest_first() -> None:
    timer: AcquisitionLockTimer[str] = AcquisitionLockTimer()
    timer.schedule("b", 200)
    timer.schedule("a", 100)
    timer.schedule("c", 300)
    assert timer.next_deadline() == 100
    assert timer.pop_due(99) == []
    assert timer.pop_due(200) == ["a", "b"]
    assert timer.pop_due(200) == []
    assert (timer.next_deadline(), len(timer)) == (300, 1)


def test_a_later_schedule_replaces_the_earlier_one() -> None:
    timer: AcquisitionLockTimer[str] = AcquisitionLockTimer()
    timer.schedule("p", 100)
    timer.schedule("p", 500)  # the partition's locks were acknowledged, next one is later
    assert timer.next_deadline() == 500
    assert timer.pop_due(400) == []
    timer.schedule("p", 50)  # and earlier again
    timer.schedule("p", 50)
    assert timer.pop_due(1_000) == ["p"]  # once, although three entries were pushed
    assert timer.next_deadline() is None


def test_cancel() -> None:
    timer: AcquisitionLockTimer[tuple[str, int]] = AcquisitionLockTimer()
    timer.schedule(("g", 0), 10)
    timer.schedule(("g", 1), 20)
    timer.cancel(("g", 0))
    timer.cancel(("g", 9))
    assert timer.deadline_of(("g", 0)) is None
    assert timer.deadline_of(("g", 1)) == 20
    assert timer.next_deadline() == 20
    assert timer.pop_due(100) == [("g", 1)]


def test_heap_stays_small_under_constant_rescheduling() -> None:
    timer: AcquisitionLockTimer[int] = AcquisitionLockTimer()
    for i in range(10_000):
        timer.schedule(i % 3, 1_000 + i)
    assert len(timer) == 3
    assert len(timer._heap) <= 2 * 3 + 64 + 1
    assert timer.pop_due(100_000) == [1, 2, 0]  # deadlines 10_997, 10_998, 10_999


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 100)), max_size=50), st.integers(0, 100)
)
def test_matches_a_dict_of_latest_deadlines(ops: list[tuple[int, int]], now: int) -> None:
    timer: AcquisitionLockTimer[int] = AcquisitionLockTimer()
    latest: dict[int, int] = {}
    for key, deadline in ops:
        timer.schedule(key, deadline)
        latest[key] = deadline
    assert timer.next_deadline() == (min(latest.values()) if latest else None)
    due = timer.pop_due(now)
    assert sorted(due) == sorted(k for k, d in latest.items() if d <= now)
    assert [latest[k] for k in due] == sorted(latest[k] for k in due)
    assert len(timer) == sum(d > now for d in latest.values())
