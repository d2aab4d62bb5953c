"""Client-side decoding of fetched batches (issue 14), in process: records/s into Arrow.

The same fetched bytes (up to 100k records of V-byte values, in batches of 500 and of 10,000;
uncompressed, lz4 and zstd) go through `client.arrow_batches.batches_to_arrow`, the Spark
source's decoder, and through `client.records.decode_acquired`, the one-record-at-a-time
reference (Python objects, no Arrow). No broker: the bytes are what a Fetch would return.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from bench.phases import Bench
from bench.phases import Row
from bench.phases import phase
from client.arrow_batches import batches_to_arrow
from client.records import AcquiredRange
from client.records import decode_acquired
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import Compression
from protocol.record_batch import build_batch
from protocol.record_batch import parse_header
from protocol.records import StoredBatch
from protocol.records import build_stored_batch

MAX_RECORDS = 100_000
BATCH_SIZES = (500, 10_000)
CODECS = (Compression.NONE, Compression.LZ4, Compression.ZSTD)
RUNS = 3


def _fetched(records: int, per_batch: int, value_size: int, codec: Compression) -> bytes:
    out = []
    for base in range(0, records, per_batch):
        n = min(per_batch, records - base)
        # Half random, half repeated: values that compress about as real payloads do.
        pairs = [
            (b"key-%08d" % i, os.urandom(value_size // 2).ljust(value_size, b"v"))
            for i in range(base, base + n)
        ]
        plain = build_batch(pairs, timestamp_ms=1_700_000_000_000, base_offset=base)
        if codec == Compression.NONE:
            out.append(plain)
            continue
        h = parse_header(plain)
        fields = StoredBatch(
            base_offset=h.base_offset,
            last_offset=h.last_offset,
            attributes=h.attributes | codec,
            base_timestamp=h.base_timestamp,
            max_timestamp=h.max_timestamp,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            base_sequence=h.base_sequence,
            record_count=h.record_count,
        )
        out.append(build_stored_batch(fields, plain[BATCH_HEADER_SIZE:]))
    return b"".join(out)


def _timed(decode: Callable[[], int], records: int, key: str, label: str, size: int) -> Row:
    """The fastest of `RUNS` (by CPU time: the machine may be shared) after a warm-up."""
    assert decode() == records, (key, records)
    best = (float("inf"), 0.0)
    for _ in range(RUNS):
        cpu0, start = time.process_time(), time.perf_counter()
        decode()
        best = min(best, (time.process_time() - cpu0, time.perf_counter() - start))
    cpu, seconds = best
    note = f"in process, best of {RUNS}; CPU is the decoder's"
    return Row(key=key, label=label, records=records, seconds=seconds, broker_cpu_s=cpu,
               value_bytes=size, note=note)  # fmt: skip


def _arrow(data: bytes) -> Callable[[], int]:
    return lambda: int(batches_to_arrow(data, topic="t", partition=0).num_rows)


def _reference(data: bytes, records: int) -> Callable[[], int]:
    return lambda: len(decode_acquired("t", 0, data, [AcquiredRange(0, records, 1)]))


@phase("decode", "fetched batches -> Arrow (the Spark decoder) vs the reference, in process")
def decode_phase(b: Bench) -> list[Row]:
    records = min(MAX_RECORDS, b.records)
    rows: list[Row] = []
    for per_batch in BATCH_SIZES:
        for codec in CODECS:
            data = _fetched(records, per_batch, b.value_size, codec)
            name, size = codec.name.lower(), b.value_size
            rows.append(
                _timed(
                    _arrow(data),
                    records,
                    f"decode-arrow-{per_batch}-{name}",
                    f"batches_to_arrow, batches of {per_batch}, {name}",
                    size,
                )
            )
            if codec in (Compression.NONE, Compression.LZ4):
                rows.append(
                    _timed(
                        _reference(data, records),
                        records,
                        f"decode-reference-{per_batch}-{name}",
                        f"reference decode_acquired, batches of {per_batch}, {name}",
                        size,
                    )
                )
    return rows
