"""Log compaction (issue 11): how fast the cleaner cleans, in MB/s of segment bytes and records/s.

In process, on segment files in a temporary directory: the records are written through the
log's own append (no broker needed to make them), every key updated ten times, then one
cleaning pass (plan on the caller, key map and copies as in the cleaner's thread, swap) is
timed. MB/s counts the sealed segment bytes the pass read; records/s the records they held.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from protocol.record_batch import build_batch
from storage.cleaner import plan_cleaning
from storage.cleaner import release_replaced
from storage.cleaner import run_cleaning
from storage.cleaner import swap_one
from storage.config import LogConfig
from storage.segment_log import SegmentLog

VERSIONS = 10  # each key is written this many times: 90% of the records are cleaned away
BATCH = 100


def _filled(directory: Path, records: int, value_size: int) -> SegmentLog:
    config = LogConfig(
        segment_bytes=8 * 1024 * 1024, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0
    )
    log = SegmentLog.open(directory, config)
    keys = max(1, records // VERSIONS)
    value = b"v" * value_size
    for start in range(0, records, BATCH):
        pairs = [(b"key-%08d" % (i % keys), value) for i in range(start, start + BATCH)]
        log.append(build_batch(pairs, timestamp_ms=1), now_ms=1)
    log.roll()
    log.flush()
    return log


@phase("compaction", "one cleaning pass over a compacted log (keys updated 10 times), in process")
def compaction_phase(b: Bench) -> list[Row]:
    records = b.share_records - b.share_records % BATCH or BATCH
    with tempfile.TemporaryDirectory(prefix="shoal-bench-compaction-") as tmp:
        log = _filled(Path(tmp), records, b.value_size)
        cpu0, start = time.process_time(), time.perf_counter()
        job = plan_cleaning(log, 2, None, 0)
        assert job is not None
        planned = time.perf_counter()
        result = run_cleaning(job)
        swaps: list[float] = []  # the broker yields to its loop between segments
        for old, copy in result.copies:
            began = time.perf_counter()
            swap_one(log, old, copy)
            swaps.append(time.perf_counter() - began)
        release_replaced([copy for _, copy in result.copies])  # the cleaner's thread's job
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
        plan_ms, swap_ms = (planned - start) * 1000, max(swaps, default=0) * 1000
        log.close()
    stats = result.stats
    return [
        Row(
            key="compaction",
            label=f"clean {len(job.segments)} segments, {records // VERSIONS} keys",
            records=records,
            seconds=seconds,
            broker_cpu_s=cpu,
            value_bytes=stats.bytes_read // records,  # so MB/s is segment bytes cleaned per s
            note=(
                f"{stats.bytes_read / seconds / 1e6:.1f} MB/s cleaned, "
                f"{stats.records_removed} removed, {stats.bytes_written / 1e6:.1f} MB written "
                f"(in process); on the event loop: plan {plan_ms:.2f} ms, "
                f"longest swap of one segment {swap_ms:.2f} ms"
            ),
        )
    ]
