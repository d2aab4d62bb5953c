"""Seed 000's worked example (records 100-121) through the durable share state.

The same operations as the seed, on a SharePartition whose changes go through the real
ShareStatePersister into SHARE_CHECKPOINT / SHARE_DELTA control batches of an in-memory log.
After every step a fresh SharePartition is recovered from that log alone and must equal the
live one in durable form.

Which sequence we write: an EQUIVALENT one, not the seed's byte for byte. Differences:
- The seed's first record is a checkpoint (StartOffset 110) although its starting state says
  SPSO 100; we checkpoint the real start (100) when the share-partition is created.
- "Acknowledge 100-109" empties the window, and DESIGN.md asks for a new checkpoint whenever
  the window empties, so we write SHARE_CHECKPOINT epoch 2 {110, 110, []} where the seed
  writes a delta {100-109 Acknowledged}. The seed itself lists this alternative at its end.
- "Acknowledge 119" writes only {119 Acknowledged 1}; the seed also writes 111-118 as
  Available with count 0. Recovery treats every offset below the recorded end that no range
  covers as Available with count 0, so both recover the same state.
Every other step writes exactly the seed's States, with BackOffset chaining as the seed shows.
"""

from __future__ import annotations

import uuid

import pytest

from broker.share.limits import ShareLimits
from broker.share.persister import change_of
from broker.share.persister import load
from broker.share.plans import Plan
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.window import BatchSpan
from broker.share.window import StateRange
from protocol.record_batch import build_batch
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import StateBatch
from storage.memory_log import MemoryLog
from storage.share_state_store import ShareStateStore
from tests.unit.test_share_partition_support import persister_over

TOPIC_ID = uuid.UUID(int=7)
LIMITS = ShareLimits(
    delivery_count_limit=5, max_record_locks=2000, lock_duration_ms=30_000, renew_enabled=True
)
ACCEPT, RELEASE, RENEW = (
    int(AcknowledgeType.ACCEPT),
    int(AcknowledgeType.RELEASE),
    int(AcknowledgeType.RENEW),
)
AVAILABLE, ACKNOWLEDGED = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED


class Harness:
    def __init__(self) -> None:
        self.log = MemoryLog()
        self.log.append(build_batch([(None, b"old")] * 100, timestamp_ms=1), now_ms=1)  # 0-99
        for first, count in ((100, 10), (110, 10), (120, 1), (121, 9)):  # data batches to 129
            assert (
                self.log.append(
                    build_batch([(None, b"r")] * count, timestamp_ms=1), now_ms=1
                ).base_offset
                == first
            )
        self.store = ShareStateStore(self.log, None)
        self.persister = persister_over(self.log, TOPIC_ID)
        self.sp = self.new_partition()
        load(self.persister, self.sp, self.log.log_start_offset, 0)

    @staticmethod
    def new_partition() -> SharePartition:
        return SharePartition("G1", TOPIC_ID, 0, start_offset=100, limits=lambda: LIMITS)

    def spans(self, offset: int) -> list[BatchSpan]:
        return [
            BatchSpan(s.base_offset, s.last_offset, s.is_control)
            for s in self.log.batch_spans(offset, 1 << 20)
        ]

    def fetch(self, member: str, now: int, max_records: int = 500) -> list[tuple[int, int, int]]:
        offset = self.sp.next_fetch_offset()
        assert offset is not None
        got = self.sp.acquire(member, self.spans(offset), max_records=max_records, now_ms=now)
        assert self.sp.take_changes() == []  # acquisition writes nothing
        return [(a.first_offset, a.last_offset, a.delivery_count) for a in got]

    def ack(self, member: str, first: int, last: int, kind: int, now: int) -> None:
        """The manager's two phases: plan, write what it will change, then apply."""
        plan = self.sp.plan_acknowledge(member, [(first, last, [kind])])
        assert isinstance(plan, Plan)
        self.persister.write(self.sp.key, change_of(self.sp, plan.changes), now)
        self.sp.apply(plan, now_ms=now)
        assert tuple(self.sp.take_changes()) == plan.changes

    def written_since(self, offset: int) -> list[tuple[int, object]]:
        return [(o, r) for o, r in self.store._records(offset) if o >= offset]

    def check_recovery(self) -> None:
        """A broker that restarts now recovers the same durable state from the log alone."""
        recovered = self.new_partition()
        load(persister_over(self.log, TOPIC_ID), recovered, self.log.log_start_offset, 0)
        live = self.sp
        assert recovered.spso == live.spso
        # Everything past the recorded end is a first delivery in flight: durable form AVAILABLE 0.
        for r in live.state_ranges():
            if r.first_offset >= recovered.speo:
                assert (r.state, r.delivery_count) == (AVAILABLE, 0), r
        cut = [
            StateRange(
                r.first_offset, min(r.last_offset, recovered.speo - 1), r.state, r.delivery_count
            )
            for r in live.state_ranges()
            if r.first_offset < recovered.speo
        ]
        assert recovered.state_ranges() == merge(cut)


def merge(ranges: list[StateRange]) -> list[StateRange]:
    out: list[StateRange] = []
    for r in ranges:
        if (
            out
            and out[-1].last_offset + 1 == r.first_offset
            and (out[-1].state, out[-1].delivery_count) == (r.state, r.delivery_count)
        ):
            out[-1] = StateRange(out[-1].first_offset, r.last_offset, r.state, r.delivery_count)
        else:
            out.append(r)
    return out


def test_seed_000_sequence_of_control_records_and_recovery_after_every_step() -> None:
    h = Harness()
    # Starting state: a checkpoint of the empty window at SPSO 100, right after the data (130).
    assert h.written_since(0) == [(130, ShareCheckpoint("G1", 1, 100, 100, ()))]
    h.check_recovery()

    # Fetch records 100-109: a first delivery writes nothing.
    assert h.fetch("A", now=0, max_records=10) == [(100, 109, 1)]
    assert h.written_since(131) == []
    h.check_recovery()

    # Acknowledge 100-109 -> SPSO 110: the window is empty, so a new checkpoint (epoch 2).
    h.ack("A", 100, 109, ACCEPT, now=1_000)
    assert h.written_since(131) == [(131, ShareCheckpoint("G1", 2, 110, 110, ()))]
    h.check_recovery()

    # Fetch records 110-119.
    assert h.fetch("A", now=2_000, max_records=10) == [(110, 119, 1)]
    h.check_recovery()

    # Release 110: SHARE_DELTA {110 Available 1}, BackOffset 131.
    h.ack("A", 110, 110, RELEASE, now=3_000)
    assert h.written_since(132) == [(132, ShareDelta("G1", 2, 131, (StateBatch(110, 110, 0, 1),)))]
    h.check_recovery()

    # Acknowledge 119: {119 Acknowledged 1} (the seed adds 111-118 Available 0: equivalent).
    h.ack("A", 119, 119, ACCEPT, now=4_000)
    assert h.written_since(133) == [(133, ShareDelta("G1", 2, 132, (StateBatch(119, 119, 2, 1),)))]
    h.check_recovery()

    # Fetch records 110 (count 2) and 120 (count 1): nothing written.
    assert h.fetch("B", now=5_000, max_records=2) == [(110, 110, 2), (120, 120, 1)]
    assert h.written_since(134) == []
    h.check_recovery()

    # Lock timeout of 111-112 only: A renews 113-118 first (a RENEW writes nothing).
    h.ack("A", 113, 118, RENEW, now=20_000)
    assert h.written_since(134) == []
    expiry = h.sp.plan_expiry(32_000)
    assert expiry.records == 2
    h.persister.write(h.sp.key, change_of(h.sp, expiry.changes), 32_000)
    h.sp.apply(expiry, now_ms=32_000)
    assert tuple(h.sp.take_changes()) == expiry.changes
    assert h.written_since(134) == [(134, ShareDelta("G1", 2, 133, (StateBatch(111, 112, 0, 1),)))]
    h.check_recovery()

    # Acknowledge 113-118.
    h.ack("A", 113, 118, ACCEPT, now=33_000)
    assert h.written_since(135) == [(135, ShareDelta("G1", 2, 134, (StateBatch(113, 118, 2, 1),)))]
    h.check_recovery()

    # Fetch records 111, 112 (count 2).
    assert h.fetch("B", now=34_000, max_records=2) == [(111, 112, 2)]
    assert h.written_since(136) == []
    h.check_recovery()

    # Acknowledge 110 -> SPSO 111.
    h.ack("B", 110, 110, ACCEPT, now=35_000)
    assert h.sp.spso == 111
    assert h.written_since(136) == [(136, ShareDelta("G1", 2, 135, (StateBatch(110, 110, 2, 2),)))]
    h.check_recovery()

    # Acknowledge 111, 112 -> SPSO 120 (120 is still acquired, so no checkpoint yet).
    h.ack("B", 111, 112, ACCEPT, now=36_000)
    assert (h.sp.spso, h.sp.speo) == (120, 121)
    assert h.written_since(137) == [(137, ShareDelta("G1", 2, 136, (StateBatch(111, 112, 2, 2),)))]
    h.check_recovery()


def test_a_long_chain_is_replaced_by_a_checkpoint() -> None:
    h = Harness()
    h.persister = persister_over(h.log, TOPIC_ID, max_deltas=3)
    load(h.persister, h.sp, 0, 0)  # recovers epoch 1 from the log
    assert h.fetch("A", now=0) == [(100, 129, 1)]
    for offset in (101, 103, 105, 107):  # four single-record releases: 3 deltas, then a checkpoint
        h.ack("A", offset, offset, RELEASE, now=1)
    kinds = [type(r).__name__ for _, r in h.written_since(131)]
    assert kinds == ["ShareDelta", "ShareDelta", "ShareDelta", "ShareCheckpoint"]
    checkpoint = h.written_since(131)[-1][1]
    assert isinstance(checkpoint, ShareCheckpoint) and checkpoint.checkpoint_epoch == 2
    h.check_recovery()


@pytest.mark.parametrize("cut", [1, 20, 50])
def test_a_torn_control_batch_at_the_tail_is_dropped_like_any_torn_batch(
    tmp_path: object, cut: int
) -> None:
    """A crash mid-write of a delta loses that delta only; the chain before it recovers."""
    from pathlib import Path

    from storage.config import LogConfig
    from storage.segment_log import SegmentLog

    directory = Path(str(tmp_path)) / "t-0"
    plog = SegmentLog.open(directory, LogConfig())
    plog.append(build_batch([(None, b"r")] * 10, timestamp_ms=1), now_ms=1)  # 0-9
    sp = SharePartition("G1", TOPIC_ID, 0, start_offset=0, limits=lambda: LIMITS)
    persister = persister_over(plog, TOPIC_ID)
    load(persister, sp, 0, 0)  # checkpoint at 10
    sp.acquire("A", [BatchSpan(0, 9, False)], max_records=500, now_ms=0)
    for offset in (0, 1):  # deltas at 11 and 12; the one at 12 is torn below
        plan = sp.plan_acknowledge("A", [(offset, offset, [ACCEPT])])
        assert isinstance(plan, Plan)
        persister.write(sp.key, change_of(sp, plan.changes), offset + 1)
        sp.apply(plan, now_ms=offset + 1)
    plog.close()
    segment = directory / "00000000000000000000.log"
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - cut])

    reopened = SegmentLog.open(directory, LogConfig())
    assert reopened.log_end_offset == 12  # the torn delta is gone, nothing before it
    recovered = SharePartition("G1", TOPIC_ID, 0, start_offset=0, limits=lambda: LIMITS)
    load(persister_over(reopened, TOPIC_ID), recovered, 0, 0)
    assert (
        recovered.spso == 1
    )  # offset 0's acknowledgement survived, offset 1's was never confirmed
    reopened.close()
