"""The whole record batches of a Fetch or ShareFetch answer, checked and decompressed.

Both record decoders (`client.records`, one record at a time, and `client.arrow_batches`, all
records at once into Arrow) start here: walk the batch headers, drop what the reader does not
want (control batches, batches outside an offset window, a partial batch the broker cut at
MaxBytes), check each CRC32C as Kafka's consumer does (`check.crcs`), and decompress the records
section through `protocol.codecs` (gzip, snappy raw or xerial, lz4 frame, zstd; bounded by its
`MAX_DECOMPRESSED_BYTES`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c
from kio.schema.errors import ErrorCode

from client.errors import KafkaError
from protocol.codecs import decompress
from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import COMPRESSION_MASK
from protocol.record_batch import CONTROL_MASK
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import MAGIC
from protocol.record_batch import MAX_COMPRESSION
from protocol.record_batch import MIN_BATCH_LENGTH
from protocol.record_batch import TIMESTAMP_TYPE_MASK
from protocol.record_batch import Buffer
from protocol.record_batch import InvalidRecordBatch

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">qiibIhiqqqhii")


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """One data batch: its header fields that records need, and its records section."""

    base_offset: int
    last_offset: int
    base_timestamp: int
    max_timestamp: int
    log_append_time: bool
    record_count: int
    records: Buffer  # decompressed; a slice of the fetched bytes when uncompressed


def corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def fetched_batches(data: Buffer, first: int = 0, last: int = 2**63 - 1) -> Iterator[FetchedBatch]:
    """The data batches of `data` holding any offset in [first, last], in order.

    :raises KafkaError: CORRUPT_MESSAGE for a batch that is not magic 2, fails its CRC or does
        not decompress; UNSUPPORTED_COMPRESSION_TYPE for a codec Kafka does not define.
    """
    view = memoryview(data)
    pos = 0
    while pos + BATCH_HEADER_SIZE <= len(view):
        (base, length, _, magic, crc, attrs, last_delta, base_ts, max_ts, *_, count) = (
            _HEADER.unpack_from(view, pos)
        )
        end = pos + LOG_OVERHEAD + length
        if end > len(view):
            break  # the broker cuts the last batch at MaxBytes
        if magic != MAGIC or length < MIN_BATCH_LENGTH:
            raise corrupt(f"record batch magic {magic}, length {length} at {pos}")
        if attrs & CONTROL_MASK or base + last_delta < first or base > last or count <= 0:
            pos = end
            continue
        if crc32c.crc32c(view[pos + ATTRIBUTES_POS : end]) != crc:
            raise corrupt(f"record batch at offset {base} fails its CRC")
        yield FetchedBatch(
            base_offset=base,
            last_offset=base + last_delta,
            base_timestamp=base_ts,
            max_timestamp=max_ts,
            log_append_time=bool(attrs & TIMESTAMP_TYPE_MASK),
            record_count=count,
            records=_records_section(view[pos + BATCH_HEADER_SIZE : end], attrs, base),
        )
        pos = end


def _records_section(body: memoryview, attrs: int, base: int) -> Buffer:
    codec = attrs & COMPRESSION_MASK
    if not codec:
        return body
    if codec > MAX_COMPRESSION:
        raise KafkaError(
            ErrorCode.unsupported_compression_type, f"codec {codec} in batch at offset {base}"
        )
    try:
        return decompress(codec, body)
    except InvalidRecordBatch as e:
        raise corrupt(f"batch at offset {base}: {e}") from e
