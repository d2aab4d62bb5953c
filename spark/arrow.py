"""Stored record batches -> one Arrow record batch of the source's schema, on the executors.

`batches_to_arrow` is the client's fast decoder's signature (`client.arrow_batches`, issue 14);
until it is merged this adapter gives the same result through the reference decoder, so
swapping is the one import below.
"""

from __future__ import annotations

from typing import Any

from client.records import AcquiredRange
from client.records import decode_acquired
from spark.rows import Columns


def batches_to_arrow(
    data: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    first: int = 0,
    last: int = 2**63 - 1,
    delivery_count: int | None = None,
    include_headers: bool = True,
) -> Any:
    """The records of offsets `first..last` in `data` as one `pyarrow.RecordBatch`."""
    ranges = [AcquiredRange(first, last, delivery_count or 0)]
    records = decode_acquired(topic, partition, bytes(data), ranges)
    return Columns.of(records, shared=delivery_count is not None).to_arrow()
