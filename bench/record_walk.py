"""The record walks of `protocol.records` (the views of compacted appends and of key-ordered
and scheduled share fetches): `python bench/record_walk.py [--old PATH]`.

Times `record_keys`, `header_values` and `null_key_indexes` over one uncompressed batch of 500
records (100-byte values, 9-byte keys, two headers), and an append to a compacted topic (the
null-key check included) of batches of 1, 10, 100 and 500 records, on a log in a temporary
directory. With `--old PATH` (another tree's `protocol/records.py`), the same functions of that
file run too, interleaved with this tree's in one process, best of 9 rounds each, and their
answers are checked equal: a ratio from the same window on a shared machine. The old file is
loaded by its path, beside this tree's other modules.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import timeit
from collections.abc import Callable
from types import ModuleType
from typing import Any

sys.path.insert(0, os.getcwd())  # the tree measured is the one run from, not this file's

import storage.compacted
from protocol import records
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from storage.log_manager import LogManager

HEADER = b"shoal.deliver.at.ms"
ROUNDS = 9


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("records_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["records_old"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _best(run: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(run, number=number, repeat=3)) / number


def _views(modules: dict[str, Any]) -> None:
    pairs = [(b"key-%05d" % i, b"v" * 100) for i in range(500)]
    batch = build_batch(pairs, timestamp_ms=1)
    headed = build_batch(
        [NewRecord(k, v, [(b"trace", b"x"), (HEADER, b"123")]) for k, v in pairs], timestamp_ms=1
    )
    cases: list[tuple[str, Callable[[Any], object]]] = [
        ("record_keys", lambda m: m.record_keys(batch)),
        ("header_values", lambda m: m.header_values(headed, HEADER)),
        ("null_key_indexes", lambda m: m.null_key_indexes(batch)),
    ]
    for name, case in cases:
        answers = {case(m) == case(records) for m in modules.values()}
        assert answers == {True}, f"{name}: the trees answer differently"
        best = dict.fromkeys(modules, 1e9)
        for _ in range(ROUNDS):
            for label, m in modules.items():
                best[label] = min(best[label], _best(lambda: case(m), 50))  # noqa: B023
        _print(f"{name}, 500-record batch", best)


def _appends(modules: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        logs = LogManager(tmp)
        for n in (1, 10, 100, 500):
            topic = f"compacted-{n}"
            logs.create_topic(topic, 1, {"cleanup.policy": "compact"})
            plog = logs.log(topic, 0)
            assert plog is not None
            batch = build_batch([(b"key-%05d" % i, b"v" * 100) for i in range(n)], timestamp_ms=1)
            best = dict.fromkeys(modules, 1e9)
            for _ in range(ROUNDS):
                for label, m in modules.items():
                    storage.compacted.null_key_indexes = m.null_key_indexes  # type: ignore[attr-defined]
                    run = lambda: plog.append(batch, now_ms=1, defer_sync=True)  # noqa: E731, B023
                    best[label] = min(best[label], _best(run, max(20, 2_000 // n)))
            storage.compacted.null_key_indexes = records.null_key_indexes  # type: ignore[attr-defined]
            _print(f"compacted append, {n}-record batch", best)


def _print(what: str, best: dict[str, float]) -> None:
    cells = "  ".join(f"{label} {s * 1e6:8.1f} µs" for label, s in best.items())
    ratio = f"  (this/old {best['this'] / best['old']:.2f})" if "old" in best else ""
    print(f"{what:36} {cells}{ratio}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", help="another tree's protocol/records.py, run interleaved")
    args = p.parse_args()
    modules: dict[str, Any] = {"this": records}
    if args.old:
        modules["old"] = _load(args.old)
    print(f"tree {os.getcwd()}")
    _views(modules)
    _appends(modules)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
