"""A data dir of many partitions stops and starts without work per partition (issue 28).

18,100 partitions took 89.7 s to stop and 41 s to start again after a clean stop, 76 s after
kill -9 with 9,520 `index_rebuilt` lines. Now, as Kafka's LogManager: one clean-shutdown marker
and one recovery-point checkpoint for the whole data dir (`storage.dir_checkpoints`); a stop
writes only what changed, in parallel and within its time; a clean start checks nothing past
the saved indexes; after a crash only what lies past each partition's recovery point is read
again (Kafka's `LogLoader.recoverLog`), and said in one line.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from protocol.record_batch import build_batch
from storage import LogConfig
from storage import LogManager
from storage import SegmentLog
from storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from storage.dir_checkpoints import RECOVERY_POINT_FILE
from storage.dir_checkpoints import read_recovery_points
from storage.segment import sync_all
from storage.segment_log import CLEAN_SHUTDOWN

TS = 1_700_000_000_000
PARTITIONS = 24
CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)


def batch(tag: int, n: int = 3) -> bytes:
    return build_batch([(None, b"v-%d-%d" % (tag, i)) for i in range(n)], timestamp_ms=TS + tag)


def fill(logs: LogManager, partitions: range, batches: int, start: int = 0) -> None:
    for p in partitions:
        plog = logs.log("t", p)
        assert plog is not None
        for tag in range(start, start + batches):
            plog.append(batch(tag), now_ms=TS)


def ends(logs: LogManager) -> list[int]:
    out = []
    for p in range(PARTITIONS):
        plog = logs.log("t", p)
        assert plog is not None
        out.append(plog.log_end_offset)
    return out


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real: Callable[[int], None] = os.fsync

    def counted(fd: int) -> None:
        calls[0] += 1
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def files(data: Path) -> dict[str, tuple[int, int]]:
    """Every file of the data dir with its inode and modification time."""
    return {
        str(p.relative_to(data)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in data.rglob("*")
        if p.is_file()
    }


def make(data: Path, **kwargs: bool) -> LogManager:
    logs = LogManager(data, CONFIG, **kwargs)
    if logs.topic("t") is None:
        logs.create_topic("t", PARTITIONS)
    return logs


def test_a_clean_stop_and_start_cost_no_write_per_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main synced a marker's removal per partition at start, and rewrote every partition's
    indexes, producer snapshot and marker at each stop, changed or not (8 syncs apiece)."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 12)
    written = ends(logs)
    assert logs.close(threads=4)  # the first stop writes what the writes changed
    fsyncs = count_fsyncs(monkeypatch)

    with capture_logs() as said:
        logs = make(tmp_path)
    assert ends(logs) == written
    assert fsyncs[0] <= 1  # the data dir's marker, removed
    stats = logs.load_stats
    assert (logs.opened_at_start, logs.recovered_at_start) == (PARTITIONS, 0)
    assert (stats.segments_scanned, stats.indexes_rebuilt, stats.truncated) == (0, 0, 0)
    [loaded] = said
    assert loaded["event"] == "logs loaded" and loaded["clean_shutdown"] is True

    before, fsyncs[0] = files(tmp_path), 0
    assert logs.close(threads=4)  # nothing written since the start: nothing per partition
    assert fsyncs[0] <= 4  # the recovery points and the marker, each a file and its directory
    after = files(tmp_path)
    changed = {name for name in after if before.get(name) != after[name]}
    assert changed <= {RECOVERY_POINT_FILE, CLEAN_SHUTDOWN_FILE}
    assert not any(name.endswith(CLEAN_SHUTDOWN) for name in after)  # no marker per partition


def test_after_a_crash_only_what_lies_past_the_recovery_points_is_read_again(
    tmp_path: Path,
) -> None:
    """Main scanned every partition's newest segment whole after kill -9, rewrote its indexes
    and said so in one line per partition."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 12)
    logs.flush_all()
    logs.save_recovery_points(logs.recovery_points())  # the checkpoint duty
    synced = ends(logs)
    seven = logs.log("t", 7)
    assert seven is not None
    segments = len(seven.segments)
    fill(logs, range(7, 8), 2, start=100)  # written after the checkpoint: 2 batches
    assert len(seven.segments) == segments  # in the same segment (a roll would sync them)
    tail = batch(200)
    torn = logs.log("t", 3)
    assert torn is not None
    torn_end = torn.log_end_offset
    torn_segment = tmp_path / "t-3" / f"{torn.segments[-1].base_offset:020d}.log"
    written = ends(logs)
    del logs, torn, seven  # kill -9: nothing closed, the page cache holds every write
    with torn_segment.open("ab") as f:
        f.write(tail[: len(tail) // 2])  # and a write the crash cut in half

    with capture_logs() as said:
        logs = make(tmp_path)
    assert ends(logs) == written  # the torn write is cut, nothing else
    assert written[3] == torn_end == synced[3]
    stats = logs.load_stats
    assert logs.recovered_at_start == PARTITIONS
    assert stats.segments_scanned == 2  # partition 7's newest segment, and the torn one
    assert stats.bytes_scanned == 2 * len(batch(100)) + len(tail) // 2
    assert (stats.truncated, stats.indexes_rebuilt) == (1, 1)  # the cut one's are rewritten
    lines = [(e["event"], e.get("kind")) for e in said]
    assert lines == [
        ("log_recovery", "truncated"),
        ("logs loaded; those not closed cleanly were checked past their recovery points", None),
    ]
    # What was read again may never have reached the disk: it is synced by the next flush,
    # and only then does the recovery point move past it.
    seven = logs.log("t", 7)
    assert seven is not None and seven.recovery_point == synced[7] < seven.log_end_offset
    logs.flush_all()
    assert seven.recovery_point == seven.log_end_offset


def test_without_recovery_points_a_crash_checks_whole_newest_segments_in_one_line(
    tmp_path: Path,
) -> None:
    """A data dir from before the checkpoint file (or with it lost) is checked as main did,
    each partition's newest segment whole, but said in one line, not one per partition."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 12)
    written = ends(logs)
    del logs
    (tmp_path / RECOVERY_POINT_FILE).unlink(missing_ok=True)
    with capture_logs() as said:
        logs = make(tmp_path)
    assert ends(logs) == written
    assert logs.load_stats.segments_scanned == PARTITIONS
    assert len(said) == 1 and said[0]["segments_scanned"] == PARTITIONS


def test_a_data_dir_of_an_older_version_opens_clean_and_is_marked_the_new_way(
    tmp_path: Path,
) -> None:
    """Older versions marked each log's clean close in its directory: honoured once."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 12)
    written = ends(logs)
    for p in range(PARTITIONS):
        plog = logs.log("t", p)
        assert isinstance(plog, SegmentLog)
        plog.close()  # as main's stop closed each log
    assert len(list(tmp_path.glob(f"t-*/{CLEAN_SHUTDOWN}"))) == PARTITIONS

    logs = make(tmp_path)
    assert ends(logs) == written
    assert (logs.recovered_at_start, logs.load_stats.segments_scanned) == (0, 0)
    assert not list(tmp_path.glob(f"t-*/{CLEAN_SHUTDOWN}"))
    assert logs.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_recovery_points(tmp_path) == {("t", p): e for p, e in enumerate(written)}


def test_logs_open_lazily_and_a_partition_asked_for_is_opened_first(tmp_path: Path) -> None:
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 4)
    written = ends(logs)
    assert logs.close()

    logs = make(tmp_path, lazy=True)
    assert logs.loading and logs.opened_at_start == 0
    seventh = logs.log("t", 7)  # asked for before its turn: opened now, never "unknown"
    assert seventh is not None and seventh.log_end_offset == written[7]
    assert logs.opened_at_start == 1
    slices = logs.open_pending(slice_s=0)
    next(slices)
    assert logs.loading
    for _ in slices:
        pass
    assert logs.fully_loaded and logs.opened_at_start == PARTITIONS
    assert ends(logs) == written


def test_a_stop_while_logs_are_opening_keeps_what_the_unopened_ones_had(tmp_path: Path) -> None:
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 4)
    written = ends(logs)
    assert logs.close()

    logs = make(tmp_path, lazy=True)  # a clean start: the unopened logs are still clean
    assert logs.log("t", 0) is not None
    assert logs.close()
    assert read_recovery_points(tmp_path) == {("t", p): e for p, e in enumerate(written)}

    logs = make(tmp_path, lazy=True)
    del logs  # a crash: the next start is unclean, and opens nothing before it is asked
    logs = make(tmp_path, lazy=True)
    assert logs.log("t", 0) is not None
    assert not logs.close()  # the unopened logs were never checked: not marked clean
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_recovery_points(tmp_path) == {("t", p): e for p, e in enumerate(written)}
    logs = make(tmp_path)
    assert ends(logs) == written and logs.load_stats.segments_scanned == 0


def test_a_stop_out_of_time_saves_the_recovery_points_and_leaves_the_rest_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Main closed the logs one after another for as long as it took."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 12)
    logs.flush_all()
    synced = ends(logs)
    fill(logs, range(PARTITIONS), 2, start=50)  # not synced yet when the stop comes
    written = ends(logs)
    real: Callable[[int], None] = os.fsync
    closing = threading.local()

    def slow(fd: int) -> None:
        if threading.current_thread().name.startswith("shoal-close"):
            closing.seen = True
            time.sleep(0.2)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow)
    started = time.monotonic()
    assert not logs.close(timeout_s=0.3, threads=2)
    assert time.monotonic() - started < 2.0  # 24 logs at 0.2 s a sync would take 5 s
    monkeypatch.undo()
    points = read_recovery_points(tmp_path)
    assert set(points) == {("t", p) for p in range(PARTITIONS)}
    assert all(synced[p] <= points[("t", p)] <= written[p] for p in range(PARTITIONS))
    assert any(points[("t", p)] < written[p] for p in range(PARTITIONS))  # some not closed
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    # The syncs under way run on (a broker's process waits for them as it exits).
    deadline = time.monotonic() + 10
    while any(t.name.startswith("shoal-close") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "closing threads still running"
        time.sleep(0.01)

    logs = make(tmp_path)
    assert ends(logs) == written
    assert logs.load_stats.segments_scanned == sum(
        points[("t", p)] < written[p] for p in range(PARTITIONS)
    )


def test_a_stop_during_a_flush_round_syncs_what_the_round_left_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flush duty clears every dirty flag, then syncs one segment after another in its
    thread. A stop used to wait for that whole round (7 s over 5,000 partitions) before its
    own closes started: now the round starts no new sync once the stop begins, and the close
    syncs whatever a log's recovery point does not cover, whoever cleared its flag."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 4)
    written = ends(logs)
    active = {}
    for p in range(PARTITIONS):
        plog = logs.log("t", p)
        assert plog is not None
        st = plog.segments[-1].log_path.stat()  # type: ignore[attr-defined]
        active[(st.st_dev, st.st_ino)] = p
    real: Callable[[int], None] = os.fsync
    lock = threading.Lock()
    synced: set[int] = set()  # partitions whose active segment a sync reached
    by_round = [0]
    in_round = threading.Event()

    def slow(fd: int) -> None:  # a slow disk, 0.1 s a sync
        st = os.fstat(fd)
        if threading.current_thread().name == "flush-round":
            in_round.set()
            time.sleep(0.1)
            with lock:
                by_round[0] += 1
        real(fd)
        with lock:
            if (st.st_dev, st.st_ino) in active:
                synced.add(active[(st.st_dev, st.st_ino)])

    monkeypatch.setattr(os, "fsync", slow)
    stopping = threading.Event()
    pending = logs.start_flush()  # every active segment's dirty flag is cleared here
    assert len(pending) == PARTITIONS
    flush = threading.Thread(target=sync_all, args=(pending, stopping), name="flush-round")
    flush.start()
    assert in_round.wait(10)
    stopping.set()  # the stop begins while the round is at its first segment
    assert logs.close(timeout_s=60, threads=8)
    flush.join(10)
    monkeypatch.undo()
    assert by_round[0] <= 2  # the whole round was 24 syncs
    assert synced == set(range(PARTITIONS))  # nothing acknowledged is left unsynced
    assert read_recovery_points(tmp_path) == {("t", p): e for p, e in enumerate(written)}
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_recovery_points_taken_earlier_never_overwrite_later_ones(tmp_path: Path) -> None:
    """The checkpoint duty takes the points on the loop and writes them in the flush thread;
    a stop takes newer ones and writes them itself. Whichever write runs last, the file keeps
    the newer points (and the two never write its .tmp at once)."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 2)
    logs.flush_all()
    duty = logs.checkpoint()  # taken, not yet written: the flush thread is busy
    fill(logs, range(PARTITIONS), 2, start=10)
    logs.flush_all()
    newer = {("t", p): e for p, e in enumerate(ends(logs))}
    logs.checkpoint()()  # the stop's
    duty()  # the duty's write runs late
    assert read_recovery_points(tmp_path) == newer


def test_a_stop_syncs_each_partition_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop after writes to every partition rewrites a few files in each directory (the
    active segment's indexes, the producer snapshot): each synced, then renamed into place,
    and the directory synced once for all of them, not once a file; caches that say which
    segment size they describe are not synced at all (9 syncs a partition, 1-2 ms each under
    load, over 5,000 partitions: most of a stop)."""
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 4)
    assert logs.close()
    logs = make(tmp_path)
    fill(logs, range(PARTITIONS), 1, start=20)  # every partition changed since the start
    written = ends(logs)
    calls = count_fsyncs(monkeypatch)
    assert logs.close(threads=1)
    # The segment, its two indexes and the producer snapshot, the directory (the files that
    # say which segment size they describe are caches, unsynced); then the data dir's two.
    per_partition = 1 + 3 + 1
    assert calls[0] <= PARTITIONS * per_partition + 4, calls[0]
    logs = make(tmp_path)
    assert ends(logs) == written and logs.load_stats.segments_scanned == 0
