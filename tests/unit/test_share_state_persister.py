"""The Persister protocol, driven through its interface: ShareStatePersister over in-memory
logs (a new instance over the same logs is a restart), and NoPersister, which keeps nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.share.persister import NoPersister
from broker.share.persister import PersistedState
from broker.share.persister import Persister
from broker.share.persister import change_of
from broker.share.persister import load
from broker.share.plans import Plan
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_state_persister import ShareStatePersister
from broker.share.window import BatchSpan
from broker.share.window import StateRange
from protocol.record_batch import build_batch
from storage import share_state_log
from storage.memory_log import MemoryLogs
from storage.share_state_store import read_snapshot_file
from storage.share_state_store import snapshot_groups
from tests.unit.test_share_partition_support import Limits

ACCEPT, RELEASE, REJECT = 1, 2, 3


class Topic:
    """Topic "t", one partition of ten records in one batch, in memory."""

    def __init__(self) -> None:
        self.logs = MemoryLogs()
        self.info = self.logs.create_topic("t", 1)
        plog = self.logs.log("t", 0)
        assert plog is not None
        plog.append(build_batch([(None, b"v")] * 10, timestamp_ms=1), now_ms=1)
        self.plog = plog
        self.limits = Limits()

    def key(self, group: str = "G") -> tuple[str, uuid.UUID, int]:
        return (group, self.info.topic_id, 0)

    def partition(self, group: str = "G") -> SharePartition:
        return SharePartition(group, self.info.topic_id, 0, start_offset=0, limits=self.limits.get)

    def control_batches(self) -> int:
        return sum(s.is_control for s in self.plog.batch_spans(0, 1 << 30))


def test_initialise_then_read_finds_the_empty_window() -> None:
    t = Topic()
    persister: Persister = ShareStatePersister(t.logs)
    assert persister.read(t.key(), 0, 0) is None
    persister.initialise(t.key(), 3, 0)
    assert ShareStatePersister(t.logs).read(t.key(), 0, 1) == PersistedState(3, 3, ())
    # The log start is a floor: what lies below it is gone.
    assert ShareStatePersister(t.logs).read(t.key(), 5, 1) == PersistedState(5, 5, ())


def test_written_changes_are_read_back_after_a_restart() -> None:
    t = Topic()
    persister: Persister = ShareStatePersister(t.logs)
    sp = t.partition()
    assert load(persister, sp, 0, 0) is False  # nothing recorded: its start is written
    sp.acquire("m", [BatchSpan(0, 9, False)], max_records=500, now_ms=0)
    plan = sp.plan_acknowledge("m", [(0, 3, [ACCEPT]), (4, 5, [RELEASE])])
    assert isinstance(plan, Plan)
    persister.write(sp.key, change_of(sp, plan.changes), 1)
    sp.apply(plan, now_ms=1)

    read = ShareStatePersister(t.logs).read(t.key(), 0, 2)
    assert read == PersistedState(
        0,
        6,  # the recorded end: 6-9 are first deliveries still under way
        (
            StateRange(0, 3, RecordState.ACKNOWLEDGED, 1),
            StateRange(4, 5, RecordState.AVAILABLE, 1),
        ),
    )
    again = t.partition()
    assert load(ShareStatePersister(t.logs), again, 0, 2) is True
    assert (again.spso, again.speo) == (4, 6)
    assert again.state_of(4) == (RecordState.AVAILABLE, 1)
    assert t.control_batches() == 2  # the first checkpoint and one delta


def test_delete_leaves_an_empty_window_and_no_summary(tmp_path: Path) -> None:
    t = Topic()
    persister = ShareStatePersister(t.logs, tmp_path)
    view: Persister = persister
    for group in ("G", "H"):
        load(view, t.partition(group), 0, 0)
    persister.flush_snapshots()  # the broker's snapshot duty
    assert view.has_state(t.key("G")) and view.groups() == {"G", "H"}

    view.delete(t.key("G"), 7, 1)
    assert not view.has_state(t.key("G"))
    assert view.groups() == {"H"}
    assert persister.due_snapshots() == []  # nothing brings the deleted snapshot back
    assert ShareStatePersister(t.logs).read(t.key("G"), 0, 2) == PersistedState(7, 7, ())

    written = t.control_batches()
    view.delete(t.key("never-started"), 0, 3)  # nothing recorded: nothing to tombstone
    assert t.control_batches() == written


def test_the_groups_are_kept_not_read_from_the_files_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DescribeGroups asks once per group id named (a million, in a hostile one): the snapshot
    files are read once, then the set follows the snapshots written and deleted."""
    t = Topic()
    persister = ShareStatePersister(t.logs, tmp_path)
    load(persister, t.partition("G"), 0, 0)
    persister.flush_snapshots()
    reads: list[Path] = []
    real = share_state_log.snapshot_groups

    def counted(state_dir: Path) -> set[str]:
        reads.append(state_dir)
        return real(state_dir)

    monkeypatch.setattr(share_state_log, "snapshot_groups", counted)
    assert [persister.groups() for _ in range(1000)][-1] == {"G"}
    assert len(reads) == 1
    load(persister, t.partition("H"), 0, 0)
    persister.flush_snapshots()
    assert persister.groups() == {"G", "H"} and len(reads) == 1  # a snapshot written: noted
    persister.delete(t.key("G"), 0, 1)
    assert persister.groups() == {"H"} and len(reads) == 2  # a delete: read again
    assert ShareStatePersister(t.logs, tmp_path).groups() == {"H"}  # as the files say


def test_a_snapshot_written_while_its_share_partition_is_deleted_does_not_bring_it_back(
    tmp_path: Path,
) -> None:
    """The broker's snapshot duty takes its list of due writes, then writes them one at a time
    in a thread, yielding between them; a DeleteGroups (or DeleteShareGroupOffsets) may delete
    the share-partition meanwhile, before or while its file is written. That write must leave
    no file: the group would be listed again, its state known (found by cancelaudit: hundreds of
    a deleted group's share-partitions came back)."""
    t = Topic()
    persister = ShareStatePersister(t.logs, tmp_path)
    for group in ("G", "H"):
        load(persister, t.partition(group), 0, 0)
    before, during = persister.due_snapshots()  # G's, H's
    assert (before.group_id, during.group_id) == ("G", "H")
    persister.delete(t.key("G"), 0, 1)  # before its write ran
    assert not before.current()
    during.run()
    persister.delete(t.key("H"), 0, 1)  # after its file was written, before `done`
    during.done()
    assert persister.groups() == frozenset()
    assert not persister.has_state(t.key("G")) and not persister.has_state(t.key("H"))
    assert ShareStatePersister(t.logs, tmp_path).groups() == frozenset()  # as the files say


def test_forget_topic_takes_its_snapshot_files(tmp_path: Path) -> None:
    t = Topic()
    persister = ShareStatePersister(t.logs, tmp_path)
    load(persister, t.partition(), 0, 0)
    persister.flush_snapshots()
    assert (tmp_path / "t-0").is_dir()
    persister.forget_topic("t", t.info.topic_id)
    assert not (tmp_path / "t-0").exists()
    assert persister.groups() == set() and persister.due_snapshots() == []


def test_snapshot_files_are_parsed_in_one_place(tmp_path: Path) -> None:
    t = Topic()
    persister = ShareStatePersister(t.logs, tmp_path)
    load(persister, t.partition(), 0, 0)
    persister.flush_snapshots()
    (good,) = (tmp_path / "t-0").glob("*.snapshot")
    snapshot = read_snapshot_file(good)
    assert snapshot is not None and (snapshot.group_id, snapshot.checkpoint_epoch) == ("G", 1)
    (tmp_path / "t-0" / "bad.snapshot").write_text("{not json")
    with capture_logs() as logs:
        assert snapshot_groups(tmp_path) == {"G"}
    assert [e["event"] for e in logs] == ["unreadable share snapshot file"]
    assert read_snapshot_file(tmp_path / "missing.snapshot") is None


def test_no_persister_keeps_nothing() -> None:
    t = Topic()
    persister: Persister = NoPersister()
    sp = t.partition()
    assert load(persister, sp, 0, 0) is False
    sp.acquire("m", [BatchSpan(0, 9, False)], max_records=500, now_ms=0)
    plan = sp.plan_acknowledge("m", [(0, 9, [ACCEPT])])
    assert isinstance(plan, Plan)
    persister.write(sp.key, change_of(sp, plan.changes), 1)
    persister.delete(t.key(), 0, 2)
    assert persister.read(t.key(), 0, 3) is None
    assert not persister.has_state(t.key()) and persister.groups() == set()
    assert t.control_batches() == 0


def test_an_emptied_window_is_checkpointed_at_its_end_and_the_offset_returned() -> None:
    """A consumer at the log end acknowledging all it holds: a checkpoint of an empty window
    at SPEO, whose offset the write returns (the manager steps over it)."""
    t = Topic()
    persister: Persister = ShareStatePersister(t.logs)
    sp = t.partition()
    load(persister, sp, 0, 0)  # the first checkpoint, at offset 10
    sp.acquire("m", [BatchSpan(0, 9, False)], max_records=500, now_ms=0)
    plan = sp.plan_acknowledge("m", [(0, 6, [ACCEPT]), (7, 9, [REJECT])])
    assert isinstance(plan, Plan)
    assert persister.write(sp.key, change_of(sp, plan.changes), 1) == 11
    sp.apply(plan, now_ms=1)
    assert ShareStatePersister(t.logs).read(t.key(), 0, 2) == PersistedState(10, 10, ())
    assert (
        persister.write(sp.key, change_of(sp, []), 2) is None
    )  # nothing to write, nothing written
