"""Produce-time rule of compacted topics: every record has a key (as Kafka).

The only place an append reads records (decompressing them, whatever the codec), and only for
topics with cleanup.policy compact: every other topic's append stays header-only.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.record_batch import BatchHeader
from protocol.record_batch import Buffer
from protocol.records import has_null_key
from storage.errors import InvalidRecord


def require_keys(records: Buffer, headers: Sequence[BatchHeader]) -> None:
    """Check the (already validated) batches of one append.

    :raises InvalidRecord: a record with a null key.
    :raises protocol.record_batch.InvalidRecordBatch: records that do not decompress or parse.
    """
    view = memoryview(records)
    pos = 0
    for header in headers:
        batch = view[pos : pos + header.size]
        pos += header.size
        if has_null_key(batch):
            raise InvalidRecord("compacted topic: a record has a null key")
