"""A change of `--processes N`: the nodes' own files rewritten for their new owners, before
any node starts (docs/multicore.md, "Changing N").

Partitions and their share state live in the partition directories and move with them; what
each process keeps in its own directory (the data dir for N = 1, `__nodes/<i>` else) does not:
committed offsets, transaction state, the producer-id block. The data dir records the N its
node directories are laid out for (`processes`); a start with another N, run by the supervisor
(or the one process) while it alone holds the data dir's lock, first rewrites them
(`broker.node_merge`), crash-safely:

1. Build: every new node's files in `__resize/<j>/`, each synced; then `__resize/ready`
   (atomically) names the N they are for. A crash before it: the build starts over.
2. Switch: the old files moved into `__resize/old/` (renames), then `__resize/moved`; the new
   ones moved into the nodes' directories; every node directory's recovery points and clean
   shutdown marker dropped (they speak of the partitions its node led under the old N: the
   first start after a change checks every log's active segment, as after a crash), leftover
   `__nodes/<i>` for i >= N removed; then `processes` says N, and `__resize` goes.
   A crash anywhere in it: the next start sees `ready` and finishes the switch.

Old files are removed only after `processes` names the new N, once the new ones are in place.
`SHOAL_RESIZE_CRASH=<step>` kills the process (SIGKILL) at that step, for the crash tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import structlog

from broker.node_merge import NODE_FILES
from broker.node_merge import Source
from broker.node_merge import read_sources
from broker.node_merge import write_node
from broker.ownership import NODES_DIR
from broker.ownership import Ownership
from storage.config import LogConfig
from storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from storage.dir_checkpoints import RECOVERY_POINT_FILE
from storage.dir_checkpoints import had_clean_shutdown
from storage.dir_checkpoints import mark_clean_shutdown
from storage.dir_lock import DataDirLock
from storage.fsutil import atomic_write
from storage.fsutil import fsync_dir
from storage.share_state_store import SHARE_STATE_DIR
from storage.share_state_store import snapshot_groups

log = structlog.get_logger("shoal.node_migration")

RECORD = "processes"  # in the data dir: the N its node directories are laid out for
WORK = "__resize"  # no partition directory's name: those end in `-<partition>`
READY, MOVED, OLD = "ready", "moved", "old"
CLEAN = "clean"  # in READY: every old node had stopped cleanly
CRASH_ENV = "SHOAL_RESIZE_CRASH"


def _crash_point(step: str) -> None:
    if os.environ.get(CRASH_ENV) == step:
        log.warning("crash point reached", step=step)
        os.kill(os.getpid(), signal.SIGKILL)


def node_dir(data_dir: Path, processes: int, node: int) -> Path:
    return Ownership(node, processes).node_dir(data_dir)


def recorded(data_dir: Path) -> int | None:
    try:
        text = (data_dir / RECORD).read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def _node_ids(data_dir: Path) -> list[int]:
    nodes = data_dir / NODES_DIR
    if not nodes.is_dir():
        return []
    return sorted(int(d.name) for d in nodes.iterdir() if d.name.isdigit() and d.is_dir())


def _holds_files(directory: Path) -> bool:
    return any((directory / name).exists() for name in NODE_FILES)


def sources(data_dir: Path) -> list[Source]:
    """Every node directory holding files, the data dir's own (N = 1) included; their ids'
    stride is the recorded N, or the highest node directory's id + 1 if larger (more is
    safe: it only overestimates the ids handed out)."""
    ids = _node_ids(data_dir)
    stride = max(recorded(data_dir) or 1, ids[-1] + 1 if ids else 1)
    found = [Source(data_dir, 1, 0)] if _holds_files(data_dir) else []
    for i in ids:
        path = data_dir / NODES_DIR / str(i)
        if _holds_files(path):
            found.append(Source(path, stride, i))
    return found


def migrate(data_dir: Path, processes: int, config: LogConfig, node_id: int = 0) -> None:
    """Lay the node directories out for `processes` (the caller holds the data dir's lock):
    nothing to do when they already are. `node_id`: the one node's id when `processes` is 1.

    :raises OSError: a file not read or written; the next start tries again.
    """
    work = data_dir / WORK
    before = recorded(data_dir)
    expected = {node_dir(data_dir, processes, j) for j in range(processes)}
    laid_out = before == processes or (
        before is None and {s.path for s in sources(data_dir)} <= expected
    )
    if laid_out and _ready(work) is None:
        if work.exists():  # a build a crash interrupted, for an N since given up
            shutil.rmtree(work)
        if before is None:
            _record_best_effort(data_dir, processes)
        return
    # A node a supervisor killed -9 left running holds its directory's lock: refuse.
    locks: list[DataDirLock] = []
    try:
        for i in _node_ids(data_dir):
            locks.append(DataDirLock(data_dir / NODES_DIR / str(i)))
        ready = _ready(work)
        if ready is not None:  # a change interrupted in its switch: finish it first
            _switch(data_dir, *ready)
            if ready[0] == processes:
                return
        _rewrite(data_dir, processes, config, node_id)
    finally:
        for lock in locks:
            lock.release()


def _record_best_effort(data_dir: Path, processes: int) -> None:
    """Nothing moves: a full disk must not stop the start (the layout is inferred again)."""
    try:
        atomic_write(data_dir / RECORD, f"{processes}\n".encode())
    except OSError as e:
        log.warning("--processes not recorded in the data dir", error=e.strerror or str(e))


def _rewrite(data_dir: Path, processes: int, config: LogConfig, node_id: int) -> None:
    work = data_dir / WORK
    before = recorded(data_dir)
    started = time.monotonic()
    found = sources(data_dir)
    log.warning(
        "--processes changed: rewriting the nodes' offsets, transactions and producer ids",
        recorded=before, processes=processes, sources=[str(s.path) for s in found],
    )  # fmt: skip
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    merged = read_sources(found, config, lambda: int(time.time() * 1000))
    merged.share_groups |= snapshot_groups(data_dir / SHARE_STATE_DIR)
    for j in range(processes):
        owner = Ownership(node_id if processes == 1 else j, processes)
        write_node(merged, work / str(j), owner, config, lambda: int(time.time() * 1000))
        _crash_point(f"built-{j}")
    fsync_dir(work)
    clean = _stopped_clean(data_dir, before)
    atomic_write(work / READY, f"{processes} {CLEAN if clean else ''}\n".encode())
    _crash_point("ready")
    _switch(data_dir, processes, clean)
    log.warning(
        "--processes changed: nodes' files rewritten", processes=processes,
        groups=len(merged.offsets), transactional_ids=len(merged.txns),
        next_producer_id_above=merged.highest_id, seconds=round(time.monotonic() - started, 3),
    )  # fmt: skip


def _ready(work: Path) -> tuple[int, bool] | None:
    """The N a built change is for, and whether every old node had stopped cleanly."""
    try:
        words = (work / READY).read_text().split()
    except FileNotFoundError:
        return None
    if not words or not words[0].isdigit():
        return None
    return int(words[0]), words[1:] == [CLEAN]


def _stopped_clean(data_dir: Path, before: int | None) -> bool:
    """Whether every node of the old layout closed all its logs (its clean-shutdown marker):
    then the partitions it led need no check, whichever node leads them now."""
    old = before or (_node_ids(data_dir)[-1] + 1 if _node_ids(data_dir) else 1)
    return all(had_clean_shutdown(node_dir(data_dir, old, j)) for j in range(old))


def _switch(data_dir: Path, processes: int, clean: bool) -> None:
    work = data_dir / WORK
    old = work / OLD
    if not (work / MOVED).exists():
        old.mkdir(exist_ok=True)
        for source in sources(data_dir):
            stash = old / ("root" if source.path == data_dir else f"node-{source.offset}")
            stash.mkdir(exist_ok=True)
            for name in NODE_FILES:
                if (source.path / name).exists():
                    os.replace(source.path / name, stash / name)
                    _crash_point("moving-old")
            fsync_dir(source.path)
            fsync_dir(stash)
        fsync_dir(old)
        atomic_write(work / MOVED, b"")
        _crash_point("moved")
    for j in range(processes):
        target = node_dir(data_dir, processes, j)
        target.mkdir(parents=True, exist_ok=True)
        built = work / str(j)
        for name in NODE_FILES:
            if (built / name).exists():
                os.replace(built / name, target / name)
                _crash_point("moving-new")
        fsync_dir(target)
    _forget_checkpoints(data_dir, processes, clean)
    _crash_point("switched")
    atomic_write(data_dir / RECORD, f"{processes}\n".encode())
    shutil.rmtree(work)
    fsync_dir(data_dir)


def _forget_checkpoints(data_dir: Path, processes: int, clean: bool) -> None:
    """Recovery points and clean-shutdown markers speak of the partitions a node led under
    the old N: dropped from every node directory, and each new node marked clean only if
    every old one was (every log was closed); leftover node directories removed."""
    for directory in (data_dir, *(data_dir / NODES_DIR / str(i) for i in _node_ids(data_dir))):
        for name in (RECOVERY_POINT_FILE, CLEAN_SHUTDOWN_FILE):
            (directory / name).unlink(missing_ok=True)
        fsync_dir(directory)
    if clean:
        for j in range(processes):
            mark_clean_shutdown(node_dir(data_dir, processes, j))
    keep = {node_dir(data_dir, processes, j) for j in range(processes)}
    for i in _node_ids(data_dir):
        path = data_dir / NODES_DIR / str(i)
        if path not in keep and not _holds_files(path):
            shutil.rmtree(path)
    nodes = data_dir / NODES_DIR
    if processes == 1 and nodes.is_dir() and not any(nodes.iterdir()):
        nodes.rmdir()
    if nodes.is_dir():
        fsync_dir(nodes)
