"""storage.inspect: a stopped broker's data dir, read offline (for `shoal share-state dump`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import StateBatch
from storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from storage.dir_lock import DataDirLock
from storage.dir_lock import DataDirLocked
from storage.errors import UnknownTopicOrPartition
from storage.inspect import DataDirectory
from storage.inspect import DataDirectoryInUse
from storage.inspect import NotADataDirectory
from storage.log_manager import LogManager
from storage.share_state_store import SHARE_STATE_DIR
from storage.share_state_store import ShareStateStore

NOW = 1_700_000_000_000


def _data_dir_with_share_state(data: Path) -> tuple[int, int]:
    """A data dir as a cleanly stopped broker leaves it: topic jobs (2 partitions), group g's
    checkpoint and one delta on jobs-0. The offsets of the two records."""
    logs = LogManager(data)
    logs.create_topic("jobs", 2)
    plog = logs.log("jobs", 0)
    assert plog is not None
    store = ShareStateStore(plog, data / SHARE_STATE_DIR / "jobs-0")
    checkpoint = store.append(ShareCheckpoint("g", 1, 0, 0, ()), NOW)
    store.write_snapshot("g", checkpoint, 1)
    delta = store.append(ShareDelta("g", 1, checkpoint, (StateBatch(0, 1, 2, 1),)), NOW)
    logs.close()
    return checkpoint, delta


def test_the_chain_of_a_cleanly_stopped_partition_and_the_log_left_clean(tmp_path: Path) -> None:
    checkpoint, delta = _data_dir_with_share_state(tmp_path)
    data = DataDirectory(tmp_path)
    assert data.shut_down_cleanly("jobs", 0)

    chain = data.share_state_chain("jobs", 0, "g")

    assert chain.snapshot_offset == checkpoint
    assert [(o, type(r).__name__) for o, r in chain.records] == [
        (checkpoint, "ShareCheckpoint"),
        (delta, "ShareDelta"),
    ]
    assert chain.records[1][1].states == (StateBatch(0, 1, 2, 1),)
    # Reading left the clean-shutdown marker: the next broker start skips recovery.
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert data.share_state_chain("jobs", 0, "other").records == []


def test_unknown_partitions_and_paths_that_hold_no_data(tmp_path: Path) -> None:
    _data_dir_with_share_state(tmp_path / "data")
    data = DataDirectory(tmp_path / "data")
    assert data.share_state_chain("jobs", 1, "g").records == []
    for topic, partition in (("jobs", 2), ("jobs", -1), ("nope", 0)):
        with pytest.raises(UnknownTopicOrPartition):
            data.share_state_chain(topic, partition, "g")
    with pytest.raises(NotADataDirectory):
        DataDirectory(tmp_path / "empty")


def _files(data: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(data)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(data.rglob("*")) if p.is_file()}  # fmt: skip


def test_a_running_brokers_data_dir_is_refused_unless_forced_and_never_changed(
    tmp_path: Path,
) -> None:
    """A broker holding the data dir (its lock, and open logs, so jobs-0 was not shut down
    cleanly) makes the offline tool refuse; forced, it reads a copy and changes no file, even
    when the log would need its indexes rebuilt."""
    checkpoint, _ = _data_dir_with_share_state(tmp_path)
    lock = DataDirLock(tmp_path)  # what a running broker (broker.server.Server) holds
    running = LogManager(tmp_path)  # jobs-0 has no clean-shutdown marker now
    try:
        for index in (tmp_path / "jobs-0").glob("*.index"):
            index.unlink()  # opening the log in place would rebuild it
        before = _files(tmp_path)
        with pytest.raises(DataDirectoryInUse, match="--force-read-only"):
            DataDirectory(tmp_path)
        data = DataDirectory(tmp_path, force_read_only=True)
        assert not data.shut_down_cleanly("jobs", 0)
        chain = data.share_state_chain("jobs", 0, "g")
        assert chain.records[0][0] == checkpoint
        assert _files(tmp_path) == before
        with pytest.raises(DataDirLocked):
            DataDirLock(tmp_path)  # a second broker on the same data dir
    finally:
        running.close()
        lock.release()
    assert DataDirectory(tmp_path).share_state_chain("jobs", 0, "g").records


def test_a_damaged_header_in_a_sealed_segment_is_stepped_over_offline(tmp_path: Path) -> None:
    """`shoal share-state dump` reads the log from its start when the snapshot file is gone;
    a batch header damaged on the way (a wrong magic byte) used to end the tool with
    InvalidRecordBatch. It is stepped over, as the broker steps over it (issue 28)."""
    logs = LogManager(tmp_path)
    logs.create_topic("jobs", 1, {"segment.bytes": "2000", "index.interval.bytes": "200"})
    plog = logs.log("jobs", 0)
    assert plog is not None
    for i in range(60):
        plog.append(build_batch([(None, b"r%03d" % i)] * 3, timestamp_ms=NOW), now_ms=NOW)
    store = ShareStateStore(plog, tmp_path / SHARE_STATE_DIR / "jobs-0")
    checkpoint = store.append(ShareCheckpoint("g", 1, 0, 0, ()), NOW)
    delta = store.append(ShareDelta("g", 1, checkpoint, (StateBatch(0, 1, 2, 1),)), NOW)
    logs.close()
    second = sorted((tmp_path / "jobs-0").glob("*.log"))[1]
    batches = list(iter_batch_headers(second.read_bytes()))
    assert len(batches) > 4 and not any(h.is_control for _, h in batches)
    data = bytearray(second.read_bytes())
    data[batches[3][0] + 16] = 7  # the magic byte of a batch inside the sealed segment
    second.write_bytes(bytes(data))

    chain = DataDirectory(tmp_path).share_state_chain("jobs", 0, "g")
    assert chain.snapshot_offset is None  # no snapshot file: the log is read from its start
    assert [(o, type(r).__name__) for o, r in chain.records] == [
        (checkpoint, "ShareCheckpoint"),
        (delta, "ShareDelta"),
    ]
