"""Produce-time rule of compacted topics: every record has a key (as Kafka).

The only place an append reads records (decompressing them, whatever the codec), and only for
topics with cleanup.policy compact: every other topic's append stays header-only. No range
check can stand in for the walk: a record's key length lies inside it, after three varints,
and no batch header field tells of keys; Kafka reads every record too (`validateKey` for each
record in LogValidator's `assignOffsetsNonCompressed` and compressed paths,
storage/.../log/LogValidator.java). The walk is `protocol.records`' one (`null_key_indexes`).
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.produce_response import RecordError
from protocol.record_batch import BatchHeader
from protocol.record_batch import Buffer
from protocol.records import null_key_indexes
from storage.errors import InvalidRecord

NO_KEY = "a compacted topic takes only records with a key"


def require_keys(records: Buffer, headers: Sequence[BatchHeader]) -> None:
    """Check the (already validated) batches of one append, in order. The first batch with
    records without a key fails the append, naming every such record of it by its index in
    the batch, as Kafka's LogValidator does (it reports per batch, and stops at the first).

    :raises InvalidRecord: a record with a null key.
    :raises protocol.record_batch.InvalidRecordBatch: records that do not decompress or parse.
    """
    view = memoryview(records)
    pos = 0
    for header in headers:
        batch = view[pos : pos + header.size]
        pos += header.size
        indexes = null_key_indexes(batch)
        if indexes:
            shown = ", ".join(map(str, indexes[:3])) + (", ..." if len(indexes) > 3 else "")
            raise InvalidRecord(
                f"compacted topic: {len(indexes)} of {header.record_count} records of the "
                f"batch have no key (batch index {shown})",
                tuple(RecordError(i, NO_KEY) for i in indexes),
            )
