"""The worked example of seed 000 (KIP-932, "Recovery and log cleaning"), records 100-121.

Each step checks SPSO, SPEO and every record of the window against the seed's "Cumulative
state" column, and `take_changes()` against the States of the SHARE_DELTA the seed writes.

Clock (lock duration 30 s): member A takes 100-109 and 110-119, member B takes 110+120 and later
111-112. The seed times out 111-112 while 113-118, fetched in the same batch, stay acquired.
To get that without leaving the seed's sequence, A renews 113-118 at t=20 s (a RENEW writes no
control record, so the seed's list of records is unchanged); at t=32 s only 111-112 are due.
"""

from __future__ import annotations

from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.window import AcquiredRecords
from broker.share.window import StateRange
from tests.unit.test_share_partition_support import FakeLog
from tests.unit.test_share_partition_support import Limits
from tests.unit.test_share_partition_support import fetch
from tests.unit.test_share_partition_support import make_partition

AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED
ACCEPT = int(AcknowledgeType.ACCEPT)
RELEASE = int(AcknowledgeType.RELEASE)
RENEW = int(AcknowledgeType.RENEW)


def expect(
    sp: SharePartition,
    spso: int,
    speo: int,
    records: dict[tuple[int, int], tuple[RecordState, int]],
) -> None:
    """SPSO, SPEO, and (state, delivery count) of every offset of the window."""
    assert (sp.spso, sp.speo) == (spso, speo)
    want = {o: sc for (lo, hi), sc in records.items() for o in range(lo, hi + 1)}
    assert sorted(want) == list(range(spso, speo))
    assert {o: sp.state_of(o) for o in range(spso, speo)} == want


def test_seed_000_worked_example() -> None:
    limits = Limits()
    log = FakeLog(end=100)
    log.append(10)  # 100-109
    sp = make_partition(limits, start_offset=100)

    # Starting state of topic-partition with latest offset 100.
    expect(sp, 100, 100, {})

    # Fetch records 100-109: no control record (a first delivery needs none).
    assert fetch(sp, log, "A", now=0) == [AcquiredRecords(100, 109, 1)]
    expect(sp, 100, 110, {(100, 109): (ACQUIRED, 1)})
    assert sp.take_changes() == []

    # Acknowledge 100-109 -> SPSO=110. SHARE_DELTA offset 131.
    assert sp.acknowledge("A", [(100, 109, [ACCEPT])], now_ms=1_000) == 0
    expect(sp, 110, 110, {})
    assert sp.take_changes() == [StateRange(100, 109, ACKNOWLEDGED, 1)]

    # Fetch records 110-119 (lock deadline 32,000).
    log.append(10)  # 110-119
    assert fetch(sp, log, "A", now=2_000) == [AcquiredRecords(110, 119, 1)]
    expect(sp, 110, 120, {(110, 119): (ACQUIRED, 1)})
    assert sp.take_changes() == []

    # Release 110. SHARE_DELTA offset 132.
    assert sp.acknowledge("A", [(110, 110, [RELEASE])], now_ms=3_000) == 0
    expect(sp, 110, 120, {(110, 110): (AVAILABLE, 1), (111, 119): (ACQUIRED, 1)})
    assert sp.take_changes() == [StateRange(110, 110, AVAILABLE, 1)]

    # Acknowledge 119. SHARE_DELTA offset 133 also holds 111-118 (Available, 0): the seed
    # extends the recorded end (111 after the previous delta) up to 119. take_changes() lists
    # only what changed; that filler is the durable form of 111-118, which the durable-state
    # code can read from state_ranges() when it wants the recorded end to move.
    assert sp.acknowledge("A", [(119, 119, [ACCEPT])], now_ms=4_000) == 0
    expect(
        sp,
        110,
        120,
        {(110, 110): (AVAILABLE, 1), (111, 118): (ACQUIRED, 1), (119, 119): (ACKNOWLEDGED, 1)},
    )
    assert sp.take_changes() == [StateRange(119, 119, ACKNOWLEDGED, 1)]
    assert StateRange(111, 118, AVAILABLE, 0) in sp.state_ranges()

    # Fetch records 110, 120 (member B, deadline 35,000): no control record, since a
    # re-acquired record's durable form (Available, count - 1) does not change.
    log.append(1)  # 120
    assert fetch(sp, log, "B", now=5_000) == [
        AcquiredRecords(110, 110, 2),
        AcquiredRecords(120, 120, 1),
    ]
    expect(
        sp,
        110,
        121,
        {
            (110, 110): (ACQUIRED, 2),
            (111, 118): (ACQUIRED, 1),
            (119, 119): (ACKNOWLEDGED, 1),
            (120, 120): (ACQUIRED, 1),
        },
    )
    assert sp.take_changes() == []

    # (Not in the seed) A renews 113-118 at t=20 s: deadline 50,000; no state change.
    assert sp.acknowledge("A", [(113, 118, [RENEW])], now_ms=20_000) == 0
    assert sp.take_changes() == []
    assert sp.next_deadline() == 32_000

    # Lock timeout elapsed 111, 112. SHARE_DELTA offset 134.
    assert sp.expire_locks(31_999) == 0
    assert sp.expire_locks(32_000) == 2
    expect(
        sp,
        110,
        121,
        {
            (110, 110): (ACQUIRED, 2),
            (111, 112): (AVAILABLE, 1),
            (113, 118): (ACQUIRED, 1),
            (119, 119): (ACKNOWLEDGED, 1),
            (120, 120): (ACQUIRED, 1),
        },
    )
    assert sp.take_changes() == [StateRange(111, 112, AVAILABLE, 1)]

    # Acknowledge 113-118. SHARE_DELTA offset 135.
    assert sp.acknowledge("A", [(113, 118, [ACCEPT])], now_ms=33_000) == 0
    expect(
        sp,
        110,
        121,
        {
            (110, 110): (ACQUIRED, 2),
            (111, 112): (AVAILABLE, 1),
            (113, 119): (ACKNOWLEDGED, 1),
            (120, 120): (ACQUIRED, 1),
        },
    )
    assert sp.take_changes() == [StateRange(113, 118, ACKNOWLEDGED, 1)]

    # Fetch records 111, 112 (member B, deadline 64,000).
    assert fetch(sp, log, "B", now=34_000) == [AcquiredRecords(111, 112, 2)]
    expect(
        sp,
        110,
        121,
        {
            (110, 112): (ACQUIRED, 2),
            (113, 119): (ACKNOWLEDGED, 1),
            (120, 120): (ACQUIRED, 1),
        },
    )
    assert sp.take_changes() == []

    # Acknowledge 110 -> SPSO=111. SHARE_DELTA offset 136.
    assert sp.acknowledge("B", [(110, 110, [ACCEPT])], now_ms=34_500) == 0
    expect(
        sp,
        111,
        121,
        {(111, 112): (ACQUIRED, 2), (113, 119): (ACKNOWLEDGED, 1), (120, 120): (ACQUIRED, 1)},
    )
    assert sp.take_changes() == [StateRange(110, 110, ACKNOWLEDGED, 2)]

    # Acknowledge 111, 112 -> SPSO=120. SHARE_DELTA offset 137.
    assert sp.acknowledge("B", [(111, 112, [ACCEPT])], now_ms=36_000) == 0
    expect(sp, 120, 121, {(120, 120): (ACQUIRED, 1)})
    assert sp.take_changes() == [StateRange(111, 112, ACKNOWLEDGED, 2)]

    # The seed's alternative SHARE_CHECKPOINT (Start 120, End 120, no states) recovers SPEO
    # back to 120; our checkpoint form keeps SPEO 121 with 120 as (Available, 0). Both restore
    # to "120 not yet delivered".
    assert sp.state_ranges() == [StateRange(120, 120, AVAILABLE, 0)]
    restored = make_partition(limits)
    restored.restore(120, 120, [])
    assert fetch(restored, log, "C", now=40_000) == [AcquiredRecords(120, 120, 1)]
