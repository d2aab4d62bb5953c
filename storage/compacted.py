"""Produce-time rule of compacted topics: every record has a key (as Kafka).

The only place an append reads records, and only for topics with cleanup.policy compact:
every other topic's append stays header-only.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.record_batch import BatchHeader
from protocol.record_batch import Buffer
from protocol.records import UnsupportedCodec
from protocol.records import has_null_key
from storage.errors import InvalidRecord
from storage.errors import UnsupportedCompressionType


def require_keys(records: Buffer, headers: Sequence[BatchHeader]) -> None:
    """Check the (already validated) batches of one append.

    :raises InvalidRecord: a record with a null key.
    :raises UnsupportedCompressionType: a codec whose keys cannot be read.
    :raises protocol.record_batch.InvalidRecordBatch: records that do not parse.
    """
    view = memoryview(records)
    pos = 0
    for header in headers:
        batch = view[pos : pos + header.size]
        pos += header.size
        try:
            missing = has_null_key(batch)
        except UnsupportedCodec as e:
            raise UnsupportedCompressionType(
                f"compacted topics take none or gzip batches: {e}"
            ) from None
        if missing:
            raise InvalidRecord("compacted topic: a record has a null key")
