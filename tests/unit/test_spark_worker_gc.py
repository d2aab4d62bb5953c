"""A reused Spark worker's first Shoal task freezes what the worker holds (`spark.worker_gc`),
so the full collection PySpark's daemon runs after every task walks only what tasks made since.

`gc.freeze()` is process-wide: each check runs a task's `read()` in a new interpreter, with
`sys.argv[0]` as in a worker that PySpark's daemon forked (`python -m pyspark.daemon`) or not.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

DAEMON = str(Path(pyspark.__file__).parent / "daemon.py")


def _reader(kind: str) -> object:
    from spark.source import ShoalDataSource

    options = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    if kind == "stream":
        source = ShoalDataSource(options | {"group": "g"})
        return source.streamReader(source.schema())
    return ShoalDataSource(options).reader(None)


def _after_a_task(kind: str, argv0: str) -> tuple[int, int]:
    """(objects frozen, objects a collection walks) after one task that reads nothing."""
    from pyspark.sql.datasource import InputPartition

    from spark.stream import ShipmentPartition

    partition = ShipmentPartition([]) if kind == "stream" else InputPartition(None)
    code = (
        "import gc, pickle, sys\n"
        f"sys.argv[0] = {argv0!r}\n"
        "reader, partition = pickle.loads(sys.stdin.buffer.read())\n"
        "assert list(reader.read(partition)) == []\n"
        "print(gc.get_freeze_count(), len(gc.get_objects()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps((_reader(kind), partition)),
        capture_output=True,
        check=True,
        timeout=60,
    )
    frozen, walked = done.stdout.decode().split()
    return int(frozen), int(walked)


@pytest.mark.parametrize("kind", ["stream", "batch"])
def test_the_first_task_in_a_daemon_worker_freezes_what_the_worker_holds(kind: str) -> None:
    frozen, walked = _after_a_task(kind, DAEMON)
    assert frozen > 20_000  # PySpark, pyarrow, kio and the client: ~50,000 measured
    assert walked < 1_000


@pytest.mark.parametrize("kind", ["stream", "batch"])
def test_a_read_outside_a_daemon_worker_freezes_nothing(kind: str) -> None:
    frozen, walked = _after_a_task(kind, "-c")
    assert frozen == 0
    assert walked > 20_000
