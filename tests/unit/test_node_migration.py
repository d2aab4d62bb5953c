"""The nodes' own files rewritten for a new `--processes N` (`broker/node_migration.py`).

Real logs in a temporary data dir, written and read by the coordinators' own classes. Kafka's
behaviour this follows: a moved `__consumer_offsets` partition is loaded whole by its new leader
(`GroupMetadataManager.loadGroupsAndOffsets`); a moved `__transaction_state` partition likewise
(`TransactionStateManager.loadTransactionsForTxnTopicPartition`), after which the new
coordinator completes PrepareCommit and PrepareAbort (`TransactionCoordinator.onElection`) and
aborts, fencing, what stays open past its timeout (`abortTimedOutTransactions`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.node_merge import PRODUCER_IDS
from broker.node_merge import first_block
from broker.node_migration import CRASH_ENV
from broker.node_migration import WORK
from broker.node_migration import migrate
from broker.node_migration import node_dir
from broker.node_migration import recorded
from broker.ownership import Ownership
from coordinator.offset_store import OFFSETS_LOG_CONFIGS
from coordinator.offset_store import OffsetStore
from coordinator.share_group_records import ShareGroupRecords
from coordinator.transaction_coordinator import SHARE_STATE
from coordinator.transaction_log import TRANSACTION_LOG_CONFIGS
from coordinator.transaction_log import TransactionLog
from protocol.consumer_offsets import OffsetValue
from protocol.transaction_log import PendingOffset
from protocol.transaction_log import TransactionRecord
from storage.config import LogConfig
from storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from storage.dir_checkpoints import RECOVERY_POINT_FILE
from storage.dir_lock import DataDirLock
from storage.dir_lock import DataDirLocked
from storage.segment_log import SegmentLog
from storage.share_state_store import SHARE_STATE_DIR
from storage.share_state_store import SNAPSHOT_SUFFIX
from storage.topics import CONSUMER_OFFSETS
from storage.topics import TRANSACTION_STATE

CONFIG = LogConfig()
GROUPS = [f"group-{i}" for i in range(12)]
NOW = 1_700_000_000_000


def _now() -> int:
    return NOW


def _offsets_of(directory: Path) -> dict[str, dict[tuple[str, int], OffsetValue]]:
    log = SegmentLog.open(
        directory / f"{CONSUMER_OFFSETS}-0", CONFIG.with_overrides(OFFSETS_LOG_CONFIGS)
    )
    try:
        store = OffsetStore(log, _now)
        return {g: store.group_offsets(g) for g in store.groups()}
    finally:
        log.close()


def _txns_of(directory: Path) -> dict[str, TransactionRecord]:
    log = SegmentLog.open(
        directory / f"{TRANSACTION_STATE}-0", CONFIG.with_overrides(TRANSACTION_LOG_CONFIGS)
    )
    try:
        return TransactionLog(log, _now).recover()
    finally:
        log.close()


def _one_process_data_dir(data: Path) -> None:
    """What one process left: every group's offsets, an ended transaction, one left open
    (with offsets of its own and a `__consumer_offsets` participant), one prepared to commit
    with offsets, and a producer-id block ending at 2000 (ids up to 1999 handed out)."""
    data.mkdir()
    log = SegmentLog.open(
        data / f"{CONSUMER_OFFSETS}-0", CONFIG.with_overrides(OFFSETS_LOG_CONFIGS)
    )
    store = OffsetStore(log, _now)
    for i, g in enumerate(GROUPS):
        store.commit(g, {("t", p): OffsetValue(10 * i + p, 3, f"m{p}", NOW - i) for p in range(3)})
    log.close()
    log = SegmentLog.open(
        data / f"{TRANSACTION_STATE}-0", CONFIG.with_overrides(TRANSACTION_LOG_CONFIGS)
    )
    txns = TransactionLog(log, _now)
    txns.append(TransactionRecord("ended", 7, 2, 60_000, "CompleteCommit", update_ms=NOW))
    txns.append(TransactionRecord(
        "open", 8, 4, 60_000, "Ongoing", {("t", 0), (CONSUMER_OFFSETS, 0)}, start_ms=NOW,
        update_ms=NOW, offsets={GROUPS[0]: {("t", 0): PendingOffset(999)}},
    ))  # fmt: skip
    txns.append(TransactionRecord(
        "prepared", 9, 1, 60_000, "PrepareCommit", {("t", 1), (CONSUMER_OFFSETS, 0)},
        start_ms=NOW, update_ms=NOW, offsets={GROUPS[1]: {("t", 1): PendingOffset(555, 3, "x")}},
    ))  # fmt: skip
    log.close()
    (data / PRODUCER_IDS).write_text("2000")
    (data / RECOVERY_POINT_FILE).write_text("0\n1\n__consumer_offsets 0 5000\n")
    (data / CLEAN_SHUTDOWN_FILE).write_text("{}")


def _crashing_change(data: Path) -> str:
    """A child's program: the change of `data` to 2 processes (killed at CRASH_ENV's step)."""
    return (
        "from pathlib import Path; from broker.node_migration import migrate; from storage."
        f"config import LogConfig; migrate(Path({str(data)!r}), 2, LogConfig())"
    )


def _served(data: Path, processes: int) -> tuple[dict[str, object], dict[str, TransactionRecord]]:
    """Every group's offsets and every id's state, each asserted to be in its owner's files."""
    offsets: dict[str, object] = {}
    txns: dict[str, TransactionRecord] = {}
    for j in range(processes):
        owner = Ownership(j, processes)
        here = node_dir(data, processes, j)
        for g, values in _offsets_of(here).items():
            assert owner.coordinates(g), (g, j)
            offsets[g] = values
        for txn_id, m in _txns_of(here).items():
            assert owner.coordinates(txn_id), (txn_id, j)
            txns[txn_id] = m
    return offsets, txns


def _without_times(offsets: dict[str, object]) -> dict[str, object]:
    return {
        g: {tp: (v.offset, v.leader_epoch, v.metadata) for tp, v in values.items()}  # type: ignore[attr-defined]
        for g, values in offsets.items()
    }


def _expected_offsets() -> dict[str, object]:
    want: dict[str, object] = {
        g: {("t", p): OffsetValue(10 * i + p, 3, f"m{p}", NOW - i) for p in range(3)}
        for i, g in enumerate(GROUPS)
    }
    return want


def test_one_to_two_places_every_group_and_id_with_its_new_coordinator(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _one_process_data_dir(data)
    migrate(data, 2, CONFIG)
    offsets, txns = _served(data, 2)
    want = _expected_offsets()
    # The prepared commit's offsets are the group's committed offsets (its decision is logged).
    prepared = offsets[GROUPS[1]]
    assert isinstance(prepared, dict) and prepared[("t", 1)].offset == 555
    want[GROUPS[1]] = {**want[GROUPS[1]], ("t", 1): prepared[("t", 1)]}  # type: ignore[dict-item]
    assert offsets == want  # the open transaction's offsets are not committed
    assert {g for g in GROUPS if Ownership(1, 2).coordinates(g)}  # some groups moved to node 1
    assert txns["ended"].state == "CompleteCommit" and txns["ended"].producer_epoch == 2
    # Open: fenced as Kafka's timed-out abort (PrepareAbort, epoch bumped), its data partition
    # kept for the abort marker, the `__consumer_offsets` participant (a node id now) dropped.
    assert (txns["open"].state, txns["open"].producer_epoch) == ("PrepareAbort", 5)
    assert txns["open"].partitions == {("t", 0)} and not txns["open"].offsets
    assert (txns["prepared"].state, txns["prepared"].partitions) == ("PrepareCommit", {("t", 1)})
    for j in range(2):  # above every id handed out: ids j + 2k, k >= the block end
        block = int((node_dir(data, 2, j) / PRODUCER_IDS).read_text())
        assert j + 2 * block > 2000 >= j + 2 * (block - 1)
    assert recorded(data) == 2 and not (data / WORK).exists()
    assert not (data / f"{CONSUMER_OFFSETS}-0").exists()
    # The one process had stopped cleanly: every log was closed, so both new nodes may trust
    # the partitions they now lead; the old recovery points (its partitions') are gone.
    assert not (data / RECOVERY_POINT_FILE).exists()
    for j in range(2):
        d = node_dir(data, 2, j)
        assert (d / CLEAN_SHUTDOWN_FILE).exists() and not (d / RECOVERY_POINT_FILE).exists()


def test_after_an_unclean_stop_every_new_node_checks_its_logs(tmp_path: Path) -> None:
    """Node 1 of two was killed -9 (no clean-shutdown marker): with one process, or three, no
    node may trust the partitions node 1 led, nor use recovery points of another layout."""
    data = tmp_path / "data"
    _one_process_data_dir(data)
    migrate(data, 2, CONFIG)
    for j in range(2):
        (node_dir(data, 2, j) / RECOVERY_POINT_FILE).write_text("0\n1\nt 0 5\n")
    (node_dir(data, 2, 1) / CLEAN_SHUTDOWN_FILE).unlink()
    migrate(data, 3, CONFIG)
    for j in range(3):
        d = node_dir(data, 3, j)
        assert not (d / CLEAN_SHUTDOWN_FILE).exists() and not (d / RECOVERY_POINT_FILE).exists()


def test_one_two_one_three_one_keeps_every_offset_and_id(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _one_process_data_dir(data)
    migrate(data, 1, CONFIG)  # the same N: nothing rewritten, N recorded
    assert recorded(data) == 1 and (data / f"{CONSUMER_OFFSETS}-0").exists()
    migrate(data, 2, CONFIG)
    after_two = _served(data, 2)
    for n in (3, 1, 3, 2, 1):
        migrate(data, n, CONFIG)
        assert _served(data, n) == after_two
        nodes = data / "__nodes"
        if n == 1:
            assert not nodes.exists()
        else:
            assert sorted(p.name for p in nodes.iterdir()) == [str(j) for j in range(n)]


def test_a_leftover_node_directory_of_an_older_n_is_read_and_removed(tmp_path: Path) -> None:
    """A data dir an older version served with 1 then 2 processes without rewriting: the
    one process's offsets stayed at the top; both are read, the latest commit winning."""
    data = tmp_path / "data"
    _one_process_data_dir(data)
    node1 = data / "__nodes" / "1"
    node1.mkdir(parents=True)
    log = SegmentLog.open(
        node1 / f"{CONSUMER_OFFSETS}-0", CONFIG.with_overrides(OFFSETS_LOG_CONFIGS)
    )
    OffsetStore(log, _now).commit(GROUPS[2], {("t", 0): OffsetValue(77, -1, "", NOW + 5)})
    log.close()
    (node1 / PRODUCER_IDS).write_text("3000")  # ids 1 + 2k, k < 3000: up to 5999
    migrate(data, 1, CONFIG)
    offsets, _ = _served(data, 1)
    assert offsets[GROUPS[2]][("t", 0)].offset == 77  # type: ignore[index]
    assert offsets[GROUPS[3]] == _expected_offsets()[GROUPS[3]]
    assert not (data / "__nodes").exists()
    assert int((data / PRODUCER_IDS).read_text()) >= 6000


@pytest.mark.parametrize(
    "step", ["built-0", "built-1", "ready", "moving-old", "moved", "moving-new", "switched"]
)
def test_a_kill_9_at_any_step_then_a_restart_ends_as_without_it(tmp_path: Path, step: str) -> None:
    reference = tmp_path / "reference"
    _one_process_data_dir(reference)
    migrate(reference, 2, CONFIG)
    data = tmp_path / "data"
    _one_process_data_dir(data)
    code = _crashing_change(data)
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, CRASH_ENV: step},
                         capture_output=True, check=False)  # fmt: skip
    assert run.returncode == -9, run.stderr.decode()[-2000:]
    migrate(data, 2, CONFIG)
    got, want = _served(data, 2), _served(reference, 2)
    assert _without_times(got[0]) == _without_times(want[0])  # a prepared commit's: the clock
    strip = {k: (m.state, m.producer_id, m.producer_epoch, m.partitions) for k, m in got[1].items()}
    assert strip == {k: (m.state, m.producer_id, m.producer_epoch, m.partitions)
                     for k, m in want[1].items()}  # fmt: skip
    for j in range(2):
        assert (node_dir(data, 2, j) / PRODUCER_IDS).read_text() == (
            node_dir(reference, 2, j) / PRODUCER_IDS
        ).read_text()
    assert recorded(data) == 2 and not (data / WORK).exists()


def test_a_crash_mid_change_then_a_start_with_yet_another_n_finishes_the_first(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _one_process_data_dir(data)
    code = _crashing_change(data)
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, CRASH_ENV: "moved"},
                         capture_output=True, check=False)  # fmt: skip
    assert run.returncode == -9
    migrate(data, 3, CONFIG)
    offsets, txns = _served(data, 3)
    assert set(offsets) == set(GROUPS) and set(txns) == {"ended", "open", "prepared"}


@pytest.mark.parametrize(("highest", "node", "nodes", "block"), [
    (-1, 0, 2, 0), (0, 0, 2, 1), (0, 1, 2, 0), (1999, 0, 2, 1000), (1999, 1, 2, 1000),
    (5, 2, 3, 2), (5, 0, 1, 6),
])  # fmt: skip
def test_the_first_block_is_above_the_highest_id(
    highest: int, node: int, nodes: int, block: int
) -> None:
    assert first_block(highest, Ownership(node, nodes)) == block
    offset = 0 if nodes == 1 else node
    assert offset + nodes * block > highest


def test_a_change_refuses_while_an_old_node_still_runs(tmp_path: Path) -> None:
    """A node a supervisor killed -9 left running holds `__nodes/<id>/.lock` and may still
    commit: the change is refused, nothing moved, and done once it is gone."""
    data = tmp_path / "data"
    _one_process_data_dir(data)
    migrate(data, 2, CONFIG)
    held = DataDirLock(node_dir(data, 2, 1))
    try:
        with pytest.raises(DataDirLocked):
            migrate(data, 1, CONFIG)
        assert recorded(data) == 2 and not (data / WORK).exists()
        migrate(data, 2, CONFIG)  # the same N: nothing to lock
    finally:
        held.release()
    migrate(data, 1, CONFIG)
    assert set(_served(data, 1)[0]) == set(GROUPS)


def test_offsets_staged_on_another_node_follow_their_transactions_decision(
    tmp_path: Path,
) -> None:
    """With two processes, a transaction's offsets for a group coordinated by the other node
    are staged in that node's offsets log until the marker (`staged_offsets`). At a change a
    prepared commit's staged offsets are committed (Kafka completes PrepareCommit on load),
    an open transaction's are dropped (it is aborted)."""
    data = tmp_path / "data"
    node0, node1 = (data / "__nodes" / str(j) for j in range(2))
    node0.mkdir(parents=True)
    node1.mkdir(parents=True)
    (data / "processes").write_text("2\n")
    log = SegmentLog.open(
        node0 / f"{TRANSACTION_STATE}-0", CONFIG.with_overrides(TRANSACTION_LOG_CONFIGS)
    )
    txns = TransactionLog(log, _now)
    txns.append(TransactionRecord(
        "committing", 9, 1, 60_000, "PrepareCommit", {("t", 1), (CONSUMER_OFFSETS, 1)},
        start_ms=NOW, update_ms=NOW,
    ))  # fmt: skip
    txns.append(TransactionRecord(
        "open", 10, 0, 60_000, "Ongoing", {("t", 2), (CONSUMER_OFFSETS, 1)}, start_ms=NOW,
        update_ms=NOW,
    ))  # fmt: skip
    log.close()
    log = SegmentLog.open(
        node1 / f"{CONSUMER_OFFSETS}-0", CONFIG.with_overrides(OFFSETS_LOG_CONFIGS)
    )
    store = OffsetStore(log, _now)
    store.commit("g", {("t", 0): OffsetValue(1, -1, "", NOW)})
    store.stage_txn(9, 1, "g", {("t", 1): OffsetValue(41, -1, "", NOW)})
    store.stage_txn(10, 0, "g", {("t", 2): OffsetValue(42, -1, "", NOW)})
    log.close()
    migrate(data, 1, CONFIG)
    offsets, moved = _served(data, 1)
    assert _without_times(offsets) == {"g": {("t", 0): (1, -1, ""), ("t", 1): (41, -1, "")}}
    assert moved["committing"].partitions == {("t", 1)}
    assert (moved["open"].state, moved["open"].partitions) == ("PrepareAbort", {("t", 2)})


def _share_groups_of(directory: Path, owner: Ownership) -> frozenset[str]:
    log = SegmentLog.open(
        directory / f"{CONSUMER_OFFSETS}-0", CONFIG.with_overrides(OFFSETS_LOG_CONFIGS)
    )
    try:
        records = ShareGroupRecords(log, _now, owner.coordinates)
        OffsetStore(log, _now, other_records=records.replay)
        return records.groups()
    finally:
        log.close()


def test_every_share_group_is_recorded_at_its_new_coordinator(tmp_path: Path) -> None:
    """With N > 1 a coordinator knows the share groups recorded in its own offsets log
    (`coordinator.share_group_records`, Kafka's ShareGroupMetadata records replayed by its new
    `__consumer_offsets` leader). A change of N keeps them, and a group with share state
    (`q`, its snapshot file as the share-partition leader writes it) is recorded too, so going
    through N = 1 (which records nothing, knowing groups from their state) loses none that N = 1
    knows; a recorded group without state is not one of them (nor a group deleted at N = 1,
    which writes no tombstone, brought back)."""
    data = tmp_path / "data"
    _one_process_data_dir(data)
    state = data / SHARE_STATE_DIR / "t-0"
    state.mkdir(parents=True)
    snapshot = {"group_id": "q", "sco": 0, "checkpoint_epoch": 0}
    (state / f"q{SNAPSHOT_SUFFIX}").write_text(json.dumps(snapshot))
    migrate(data, 2, CONFIG)
    shared = {f"share-{i}" for i in range(8)}
    for j in range(2):
        owner = Ownership(j, 2)
        log = SegmentLog.open(
            node_dir(data, 2, j) / f"{CONSUMER_OFFSETS}-0",
            CONFIG.with_overrides(OFFSETS_LOG_CONFIGS),
        )
        ShareGroupRecords(log, _now, owner.coordinates).record_all(shared)
        log.close()
    for n, want in ((3, shared | {"q"}), (1, None), (2, {"q"})):
        migrate(data, n, CONFIG)
        if want is None:
            continue
        known = [_share_groups_of(node_dir(data, n, j), Ownership(j, n)) for j in range(n)]
        assert set().union(*known) == want, n
        for j, groups in enumerate(known):
            assert all(Ownership(j, n).coordinates(g) for g in groups)


def test_a_prepared_commits_share_participant_is_dropped(tmp_path: Path) -> None:
    """`(__share_group_state, node)` says a process staged share acknowledgements for the
    transaction (`coordinator.transaction_coordinator.share_participant`); they are in memory
    and gone at the stop, and under another N the name means another node (with N = 1, a
    partition to write a marker to). The rewrite keeps the data partitions only."""
    data = tmp_path / "data"
    _one_process_data_dir(data)
    log = SegmentLog.open(
        data / f"{TRANSACTION_STATE}-0", CONFIG.with_overrides(TRANSACTION_LOG_CONFIGS)
    )
    TransactionLog(log, _now).append(TransactionRecord(
        "shared", 10, 1, 60_000, "PrepareCommit", {("t", 2), (SHARE_STATE, 0)},
        start_ms=NOW, update_ms=NOW,
    ))  # fmt: skip
    log.close()
    migrate(data, 2, CONFIG)
    shared = _served(data, 2)[1]["shared"]
    assert (shared.state, shared.partitions) == ("PrepareCommit", {("t", 2)})
