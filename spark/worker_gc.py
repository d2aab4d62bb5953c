"""Cheap garbage collection between the tasks of a reused Spark Python worker.

PySpark's daemon runs a full `gc.collect()` in a reused worker after every task
(`pyspark/daemon.py`). A full collection walks every container object in the process, and a
worker that has run a Shoal read holds ~100,000 (PySpark, pyarrow, numpy, kio, the client),
so each collection cost 35-50 ms of CPU, measured in the workers of `make bench`'s spark
phase: at numPartitions=4, 40 tasks per 1M records, that was 1.2-2 s of the workers' 2-3 s.
A trivial source's worker holds ~34,000 and pays ~11 ms.

`gc.freeze()` moves every object that exists into a permanent generation that collections
skip. Done once, on a worker's first task, it leaves the collection after each task only the
objects made since. Reference counting still frees frozen objects; only cyclic garbage that
exists at the freeze is never reclaimed, a one-off of a few objects per process.

Only in a process that PySpark's daemon forked: elsewhere (a test calling `read()` directly, a
worker started without the daemon) nothing collects after every task, and freezing another
program's heap is not this library's business.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

_done = False


def _in_daemon_worker() -> bool:
    return Path(sys.argv[0] if sys.argv else "").parts[-2:] == ("pyspark", "daemon.py")


def freeze_once() -> None:
    """Freeze the worker's objects, on its first task (a task's `read()` calls this)."""
    global _done
    if not _done:
        _done = True
        if _in_daemon_worker():
            gc.freeze()
