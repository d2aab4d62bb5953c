"""Recovery when share-state records are damaged: lose as little as the records on disk allow.

A chain of checkpoint E1 + 2 deltas is replaced by checkpoint E2 (holding the change "accept
20-29"), followed by 2 deltas of E2 (accept 30-49). When E2 is unreadable, recovery falls back
to E1's chain and applies E2's intact deltas on top: only 20-29 (whose acceptance only E2 held)
are delivered again; 30-49 stay accepted. Before, every record after E1's chain came back.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.share.limits import ShareLimits
from broker.share.persister import change_of
from broker.share.persister import load
from broker.share.plans import Plan
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.window import BatchSpan
from protocol.record_batch import build_batch
from protocol.share_state import ShareCheckpoint
from storage.config import LogConfig
from storage.segment_log import SegmentLog
from storage.share_state_store import ShareStateStore
from tests.unit.test_share_partition_support import persister_over

LIMITS = ShareLimits(
    delivery_count_limit=5, max_record_locks=2000, lock_duration_ms=30_000, renew_enabled=True
)
TOPIC_ID = uuid.UUID(int=3)
ACCEPT = 1


def partition() -> SharePartition:
    return SharePartition("G", TOPIC_ID, 0, start_offset=0, limits=lambda: LIMITS)


def write_chain(directory: Path, snapshots: Path | None) -> tuple[int, SharePartition]:
    """The chain above; returns the offset of checkpoint E2 and the live partition."""
    plog = SegmentLog.open(directory, LogConfig())
    for _ in range(10):
        plog.append(build_batch([(None, b"r")] * 10, timestamp_ms=1), now_ms=1)  # 0-99
    persister = persister_over(plog, TOPIC_ID, snapshots, max_deltas=2)
    sp = partition()
    load(persister, sp, 0, 0)  # E1 at 100
    sp.acquire(
        "A", [BatchSpan(b, b + 9, False) for b in range(0, 100, 10)], max_records=100, now_ms=0
    )
    for first in range(0, 50, 10):  # deltas at 101, 102; E2 at 103; deltas at 104, 105
        plan = sp.plan_acknowledge("A", [(first, first + 9, [ACCEPT])])
        assert isinstance(plan, Plan)
        persister.write(sp.key, change_of(sp, plan.changes), 1)
        sp.apply(plan, now_ms=1)
    persister.flush_snapshots()
    records = dict(ShareStateStore(plog, None)._records(100))
    assert isinstance(records[103], ShareCheckpoint) and records[103].checkpoint_epoch == 2
    plog.close()
    return 103, sp


def damage(directory: Path, offset: int) -> None:
    """Flip bytes inside the records of the batch at `offset` (its header stays readable)."""
    plog = SegmentLog.open(directory, LogConfig())
    batch = plog.read(offset, 1)
    plog.close()
    path = directory / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    at = data.index(batch[:70]) + 70
    data[at : at + 8] = bytes(b ^ 0xFF for b in data[at : at + 8])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("with_snapshot", [False, True], ids=["log-scan", "snapshot-at-E2"])
def test_a_damaged_newest_checkpoint_costs_only_its_own_change(
    tmp_path: Path, with_snapshot: bool
) -> None:
    directory = tmp_path / "t-0"
    snapshots = tmp_path / "snap" if with_snapshot else None
    e2, live = write_chain(directory, snapshots)
    assert live.spso == 50
    damage(directory, e2)

    plog = SegmentLog.open(directory, LogConfig())
    recovered = partition()
    with capture_logs() as logs:
        load(persister_over(plog, TOPIC_ID, snapshots), recovered, 0, 5)
    assert recovered.spso == 20  # 20-29: their acceptance was only in the damaged record
    assert {recovered.state_of(o)[0] for o in range(20, 30)} == {RecordState.AVAILABLE}
    assert {recovered.state_of(o)[0] for o in range(30, 50)} == {RecordState.ACKNOWLEDGED}
    damage_lines = [e for e in logs if e["event"].startswith("share state recovered with damage")]
    assert len(damage_lines) == 1 and "checkpoint at 103 unreadable" in damage_lines[0]["damage"]


def test_the_recovered_state_is_checkpointed_so_the_damage_is_not_met_again(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    e2, _ = write_chain(directory, None)
    damage(directory, e2)
    plog = SegmentLog.open(directory, LogConfig())
    load(persister_over(plog, TOPIC_ID), partition(), 0, 5)
    again = partition()
    with capture_logs() as logs:
        load(persister_over(plog, TOPIC_ID), again, 0, 6)
    assert again.spso == 20
    assert not [e for e in logs if e["event"].startswith("share state recovered with damage")]
