"""Retry backoff (issue 35, `share.release.backoff.*`) over a bare window, each acquisition
policy, a SharePartition, and the share-state records that make the wait durable.

A record RELEASEd (or whose lock expired) is acquirable again only after
`min(max, initial * multiplier^(deliveryCount - 1))` ms; the rest of the partition flows past
it. The wait is a `not_before` time on the window's AVAILABLE range, written in the
SHARE_DELTA that records the release (value version 1; version 0 reads as "no wait").
"""

from __future__ import annotations

import uuid

import pytest

from broker.share.ack_runs import AckBatch
from broker.share.acquire.batch_optimized import BATCH_OPTIMIZED
from broker.share.acquire.key_ordered import KeyOrdered
from broker.share.acquire.not_before import Backoff
from broker.share.acquire.policy import AcquisitionPolicy
from broker.share.acquire.policy import Fetch
from broker.share.acquire.record_limit import RECORD_LIMIT
from broker.share.limits import ShareLimits
from broker.share.plans import Plan
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ShareWindow
from broker.share.window import StateRange
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from coordinator.group_configs import InvalidGroupConfig
from protocol.share_state import SHARE_DELTA
from protocol.share_state import ShareDelta
from protocol.share_state import StateBatch
from protocol.share_state import decode_value
from protocol.share_state import encode_value

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
RELEASE = AcknowledgeType.RELEASE
BACKOFF = Backoff(initial_ms=2000, max_ms=60_000, multiplier=2.0)


def offsets(out: list[AcquiredRecords]) -> list[int]:
    return [o for a in out for o in range(a.first_offset, a.last_offset + 1)]


def test_the_delay_grows_by_the_multiplier_up_to_the_max() -> None:
    assert [BACKOFF.delay_ms(n) for n in (1, 2, 3, 4)] == [2000, 4000, 8000, 16000]
    assert Backoff(2000, 5000, 2.0).delay_ms(3) == 5000
    assert Backoff(0, 60_000, 2.0).not_before(3, 1000) == 0  # initial 0: off
    assert Backoff(1000, 60_000, 10.0).delay_ms(30_000) == 60_000  # no float overflow
    assert BACKOFF.not_before(1, 1000) == 3000


def released(w: ShareWindow, first: int, last: int, wait: int) -> None:
    w.finish(first, last, lambda b: AVAILABLE, lambda b: wait)


def test_a_waiting_range_is_passed_over_and_the_rest_flows() -> None:
    w = ShareWindow(0)
    w.extend(0, 9)
    out: list[AcquiredRecords] = []
    w.acquire(0, 9, "m", 30_000, out, now_ms=0)
    released(w, 2, 4, 5000)
    assert w.take_changes() == [StateRange(2, 4, AVAILABLE, 1, 5000)]  # the wait is durable
    released(w, 0, 1, 0)  # no backoff: acquirable at once
    assert w.waiting(4999) == 3 and w.next_wait(4999) == 5000
    assert w.first_available(4999) == 0 and w.first_available() == 0
    out = []
    assert w.acquire(0, 19, "n", 30_000, out, now_ms=4999) == 12  # 0-1 and 10-19, not 2-4
    assert offsets(out) == [0, 1, *range(10, 20)]
    assert w.first_available(4999) is None and w.first_available() == 2
    out = []
    assert w.acquire(0, 19, "n", 30_000, out, now_ms=5000) == 3
    assert out == [AcquiredRecords(2, 4, 2)]  # its second delivery
    assert w.waiting(5000) == 0 and w.next_wait(5000) is None


def test_a_record_limit_counts_only_what_it_may_take() -> None:
    w = ShareWindow(0)
    w.extend(0, 9)
    w.acquire(0, 9, "m", 30_000, [], now_ms=0)
    released(w, 0, 4, 5000)
    released(w, 5, 9, 0)
    out: list[AcquiredRecords] = []
    assert w.acquire(0, 9, "n", 30_000, out, limit=3, now_ms=10) == 3
    assert out == [AcquiredRecords(5, 7, 2)]


def test_a_restored_wait_is_kept_and_counted() -> None:
    w = ShareWindow(0)
    w.restore(0, 10, [StateRange(3, 5, AVAILABLE, 1, 8000)])
    assert w.waiting(7999) == 3 and w.next_wait(0) == 8000
    out: list[AcquiredRecords] = []
    w.acquire(0, 9, "m", 30_000, out, now_ms=7999)
    assert offsets(out) == [0, 1, 2, 6, 7, 8, 9]
    assert [(r.first_offset, r.last_offset, r.not_before) for r in w.state_ranges()] == [
        (0, 2, 0), (3, 5, 8000), (6, 9, 0)
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["batch_optimized", "record_limit"])
def test_each_policy_skips_waiting_records(name: str) -> None:
    policy: AcquisitionPolicy = {"batch_optimized": BATCH_OPTIMIZED, "record_limit": RECORD_LIMIT}[
        name
    ]
    w = ShareWindow(0)
    w.extend(0, 4)
    w.acquire(0, 4, "m", 30_000, [], now_ms=0)
    released(w, 0, 4, 5000)
    spans = [BatchSpan(0, 4, False), BatchSpan(5, 9, False)]
    got = policy.acquire(w, Fetch("n", spans, 0, 500, 100, 30_100, 1000))
    assert offsets(got) == [5, 6, 7, 8, 9]
    got = policy.acquire(w, Fetch("n", spans, 0, 500, 5000, 35_000, 1000))
    assert got == [AcquiredRecords(0, 4, 2)]


def test_key_order_outlasts_the_wait() -> None:
    """Key-ordered sharing: a waiting record of key 7 holds its key's later records back
    (they would overtake it), while other keys go."""
    w = ShareWindow(0)
    policy = KeyOrdered(0)
    spans = [BatchSpan(0, 3, False)]
    keys = {0: 7, 1: 8, 2: 7, 3: 9}
    first = policy.acquire(w, Fetch("m", spans, 0, 1, 0, 30_000, 1000, keys))
    assert offsets(first) == [0]
    released(w, 0, 0, 5000)
    one = policy.acquire(w, Fetch("m", spans, 0, 1, 10, 30_010, 1000, keys))
    assert offsets(one) == [1]  # the waiting record takes no place of MaxRecords
    again = policy.acquire(w, Fetch("m", spans, 0, 500, 10, 30_010, 1000, keys))
    assert offsets(again) == [3]  # not 0 (waits), nor 2 (key 7 after 0)


# ------------------------------------------------------------------ a SharePartition


def partition(backoff: Backoff = BACKOFF) -> SharePartition:
    limits = ShareLimits(
        delivery_count_limit=5, max_record_locks=1000, lock_duration_ms=30_000,
        renew_enabled=True, backoff=backoff,
    )  # fmt: skip
    return SharePartition("g", uuid.uuid4(), 0, start_offset=0, limits=lambda: limits)


def test_released_records_come_back_after_2_s_then_4_s() -> None:
    sp = partition()
    spans = [BatchSpan(0, 9, False)]
    assert offsets(sp.acquire("m", spans, max_records=500, now_ms=1000)) == list(range(10))
    batch: AckBatch = (3, 3, [int(RELEASE)])
    plan = sp.plan_acknowledge("m", [batch], now_ms=1000)
    assert isinstance(plan, Plan)
    assert plan.changes == (StateRange(3, 3, AVAILABLE, 1, 3000),)
    sp.apply(plan, now_ms=1000)
    assert sp.next_wait(1000) == 3000 and sp.delayed_count(1000) == 1
    assert sp.acquire("m", spans, max_records=500, now_ms=2999) == []
    assert sp.acquire("m", spans, max_records=500, now_ms=3000) == [AcquiredRecords(3, 3, 2)]
    # Every lock has expired by 33_000: a release too. Offset 3, after its second delivery,
    # waits 4 s; the others, after their first, 2 s.
    expiry = sp.plan_expiry(33_000)
    assert expiry.changes == (
        StateRange(0, 2, AVAILABLE, 1, 35_000),
        StateRange(3, 3, AVAILABLE, 2, 37_000),
        StateRange(4, 9, AVAILABLE, 1, 35_000),
    )
    sp.apply(expiry, now_ms=33_000)
    assert sp.acquire("m", spans, max_records=500, now_ms=34_999) == []
    got = sp.acquire("m", spans, max_records=500, now_ms=36_999)
    assert offsets(got) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert sp.acquire("m", spans, max_records=500, now_ms=37_000) == [AcquiredRecords(3, 3, 3)]


def test_without_backoff_a_release_is_acquirable_at_once() -> None:
    sp = partition(Backoff())
    spans = [BatchSpan(0, 9, False)]
    sp.acquire("m", spans, max_records=500, now_ms=0)
    plan = sp.plan_member_release("m", 0)
    assert all(c.not_before == 0 for c in plan.changes)
    sp.apply(plan, now_ms=0)
    assert sp.next_wait(0) is None
    assert offsets(sp.acquire("n", spans, max_records=500, now_ms=0)) == list(range(10))


# ------------------------------------------------------------ durable form, configs


def test_a_wait_is_written_as_value_version_1_and_old_records_read_as_no_wait() -> None:
    waiting = ShareDelta("g", 1, 130, (StateBatch(110, 110, 0, 1, 123_456),))
    value = encode_value(waiting)
    assert value[:2] == b"\x00\x01"
    assert decode_value(SHARE_DELTA, value) == waiting
    plain = ShareDelta("g", 1, 130, (StateBatch(110, 110, 0, 1),))
    old = encode_value(plain)
    assert old[:2] == b"\x00\x00" and len(old) == len(value) - 8  # byte for byte as before
    assert decode_value(SHARE_DELTA, old).states[0].not_before == 0


def test_group_configs_are_bounded_by_broker_configs() -> None:
    broker = {n: v for n, (v, _) in BROKER_DEFAULTS.items()}
    configs = GroupConfigs(None, broker.__getitem__)
    assert configs.share("g").release_backoff_initial_ms == 0  # off by default
    configs.alter("g", {"share.release.backoff.initial.ms": "2000",
                        "share.release.backoff.multiplier": "1.5"})  # fmt: skip
    view = configs.share("g")
    assert (view.release_backoff_initial_ms, view.release_backoff_multiplier) == (2000, 1.5)
    with pytest.raises(InvalidGroupConfig, match="above the broker maximum"):
        configs.validate("share.release.backoff.max.ms", "3600001")
    with pytest.raises(InvalidGroupConfig, match="below the broker minimum"):
        configs.validate("share.release.backoff.multiplier", "0.5")
    with pytest.raises(InvalidGroupConfig, match="finite"):
        configs.validate("share.release.backoff.multiplier", "nan")
    broker["group.share.max.release.backoff.initial.ms"] = 1000  # a bound lowered since
    assert configs.share("g").release_backoff_initial_ms == 1000


# ----------------------------------------- key order, N in flight per key (issue 35 part 4)


def test_key_order_lets_n_records_of_a_key_in_flight() -> None:
    """share.key.ordering.max.in.flight.per.key=2: two records of a key at once, the third
    only once one of them is done; other keys as ever."""
    w = ShareWindow(0)
    policy = KeyOrdered(0)
    spans = [BatchSpan(0, 4, False)]
    keys = {0: 7, 1: 7, 2: 7, 3: 8, 4: 7}

    def fetch(now: int) -> Fetch:
        return Fetch("m", spans, 0, 500, now, now + 30_000, 1000, keys, per_key=2)

    assert offsets(policy.acquire(w, fetch(0))) == [0, 1, 3]
    w.finish(0, 0, lambda b: RecordState.ACKNOWLEDGED)
    assert offsets(policy.acquire(w, fetch(1))) == [2]  # 1 and 2 in flight: 4 waits
    w.finish(1, 2, lambda b: RecordState.ACKNOWLEDGED)
    assert offsets(policy.acquire(w, fetch(2))) == [4]
    one = Fetch("m", spans, 0, 500, 0, 30_000, 1000, keys)  # per_key=1: in order, as before
    assert offsets(KeyOrdered(0).acquire(ShareWindow(0), one)) == [0, 3]
