"""Records inside a v2 batch: decoded only for compacted topics (keys), the log cleaner, and
the share groups that opt in (key ordering, scheduled delivery).

Every other path stays header-only (`protocol.record_batch`). A record is::

    length varint | attributes int8 | timestampDelta varint | offsetDelta varint |
    key (varint length, -1 = null) | value (varint length, -1 = null) | headers

Every codec Kafka defines is read and written (`protocol.codecs`): the cleaner re-encodes a
surviving run with its batch's own codec.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

from protocol.codecs import compress
from protocol.codecs import decompress
from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import COMPRESSION_MASK
from protocol.record_batch import CRC_POS
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import MAGIC
from protocol.record_batch import BatchHeader
from protocol.record_batch import Buffer
from protocol.record_batch import Compression
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import encode_varint
from protocol.record_batch import parse_header
from protocol.record_batch import read_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Record:
    attributes: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    value_is_null: bool  # a tombstone
    tail: bytes  # key, value and headers as stored: re-encoded unchanged


def _payload(batch: Buffer, header: BatchHeader) -> Buffer:
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    if header.compression == Compression.NONE:
        return body
    return decompress(header.compression, body)


def _parse_record(data: Buffer, pos: int) -> tuple[Record, int]:
    length, body = read_varint(data, pos)
    end = body + length
    if length < 1 or end > len(data):
        raise InvalidRecordBatch("length", f"record of {length} bytes at {pos}")
    attributes = data[body]
    ts_delta, p = read_varint(data, body + 1)
    offset_delta, tail = read_varint(data, p)
    key_len, p = read_varint(data, tail)
    key = bytes(data[p : p + key_len]) if key_len >= 0 else None
    p += max(key_len, 0)
    value_len, _ = read_varint(data, p)
    record = Record(attributes, ts_delta, offset_delta, key, value_len < 0, bytes(data[tail:end]))
    return record, end


def decode_records(batch: Buffer) -> tuple[BatchHeader, list[Record]]:
    """The header and every record of one stored batch (decompressed).

    :raises InvalidRecordBatch: records that do not decompress or parse.
    """
    header = parse_header(batch)
    data = _payload(batch, header)
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(header.record_count):
            record, pos = _parse_record(data, pos)
            records.append(record)
    except IndexError as e:
        raise InvalidRecordBatch("truncated", "record runs past the batch") from e
    return header, records


def record_value(record: Record) -> bytes | None:
    """A decoded record's value (None: a tombstone), read from its stored tail.

    :raises InvalidRecordBatch: a tail that does not parse.
    """
    if record.value_is_null:
        return None
    try:
        key_len, pos = read_varint(record.tail, 0)
        value_len, pos = read_varint(record.tail, pos + max(key_len, 0))
    except IndexError as e:
        raise InvalidRecordBatch("truncated", "record value runs past the record") from e
    if pos + value_len > len(record.tail):
        raise InvalidRecordBatch("truncated", "record value runs past the record")
    return record.tail[pos : pos + value_len]


def _records(data: Buffer, header: BatchHeader) -> Iterator[tuple[int, int, int, int]]:
    """The one walk over a batch's records for the views below: (offset, key length, key
    position, end) of each record (-1: a null key; `end` is the position after the record),
    with nothing copied. Plain tuples: a view runs once per record of a batch.

    :raises InvalidRecordBatch: a record that runs past the data.
    """
    pos, base, size = 0, header.base_offset, len(data)
    try:
        for _ in range(header.record_count):
            length, body = read_varint(data, pos)
            pos = body + length
            if length < 1 or pos > size:
                raise InvalidRecordBatch("length", f"record of {length} bytes")
            # timestampDelta (after the attributes byte), offsetDelta, key length; a varint
            # of one byte, the commonest, is read inline (a call costs more than the read).
            p = body + 1
            if data[p] < 0x80:
                p += 1
            else:
                _, p = read_varint(data, p)
            b = data[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                offset_delta, p = read_varint(data, p)
            b = data[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = read_varint(data, p)
            yield base + offset_delta, key_len, p, pos
    except IndexError as e:
        raise _truncated() from e


def _truncated() -> InvalidRecordBatch:
    return InvalidRecordBatch("truncated", "record runs past the batch")


def _header(data: Buffer, p: int, end: int, name: bytes) -> tuple[bool, bytes | None]:
    """(found, value) of the first header `name` of the record whose value's length stands
    at `p` and which ends at `end`; its value is skipped, not copied.

    :raises InvalidRecordBatch: headers that run past the record or the data.
    """
    found, value = False, None
    try:
        value_len, p = read_varint(data, p)
        count, p = read_varint(data, p + max(value_len, 0))
        for _ in range(count):
            name_len, p = read_varint(data, p)
            found = data[p : p + name_len] == name
            value_len, p = read_varint(data, p + name_len)
            if found:
                value = bytes(data[p : p + value_len]) if value_len >= 0 else None
                break
            p += max(value_len, 0)
    except IndexError as e:
        raise _truncated() from e
    if p > end:
        raise InvalidRecordBatch("length", "record headers run past the record")
    return found, value


def record_keys(batch: Buffer) -> list[tuple[int, bytes | None]]:
    """(offset, key) of every record of one stored batch (decompressed); values and headers
    are skipped, not copied. For key-ordered share groups only.

    :raises InvalidRecordBatch: records that do not decompress or parse.
    """
    header = parse_header(batch)
    data = _payload(batch, header)
    return [
        (offset, bytes(data[p : p + n]) if n >= 0 else None)
        for offset, n, p, _ in _records(data, header)
    ]


def header_values(batch: Buffer, name: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of one stored batch that has a header `name` (its
    first such header; a null value is None). Keys and values are skipped, not copied. For
    share-partitions of topics with scheduled delivery only.

    :raises InvalidRecordBatch: records that do not decompress or parse.
    """
    header = parse_header(batch)
    data = _payload(batch, header)
    out: list[tuple[int, bytes | None]] = []
    for offset, n, p, end in _records(data, header):
        found, value = _header(data, p + max(n, 0), end, name)
        if found:
            out.append((offset, value))
    return out


def null_key_indexes(batch: Buffer) -> list[int]:
    """The index in the batch of every record whose key is null (compacted topics refuse
    those, and name them so: KIP-467's record errors). Keys and values are skipped, not copied.

    :raises InvalidRecordBatch: records that do not decompress or parse.
    """
    header = parse_header(batch)
    data = _payload(batch, header)
    out: list[int] = []
    for i, (_, key_len, _, _) in enumerate(_records(data, header)):
        if key_len < 0:
            out.append(i)
    return out


def encode_run(records: Sequence[Record], first_delta: int) -> bytes:
    """Records re-encoded with offset deltas relative to `first_delta` (timestamps unchanged)."""
    out = bytearray()
    for r in records:
        body = (
            bytes((r.attributes,))
            + encode_varint(r.timestamp_delta)
            + encode_varint(r.offset_delta - first_delta)
            + r.tail
        )
        out += encode_varint(len(body))
        out += body
    return bytes(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredBatch:
    """The header fields of a batch the cleaner writes; offsets are absolute."""

    base_offset: int
    last_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    partition_leader_epoch: int = -1


def build_stored_batch(fields: StoredBatch, records: bytes) -> bytes:
    """Encode a batch of already-encoded `records` (compressed with the batch's codec) with a
    fresh CRC32C. `record_count` 0 makes an empty batch: a header alone that says the offsets
    it covers hold nothing."""
    codec = fields.attributes & COMPRESSION_MASK
    if codec != Compression.NONE and fields.record_count:
        records = compress(codec, records)
    attributes = fields.attributes if fields.record_count else fields.attributes & ~COMPRESSION_MASK
    header = bytearray(
        _HEADER.pack(
            fields.base_offset,
            BATCH_HEADER_SIZE - LOG_OVERHEAD + len(records),
            fields.partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            fields.last_offset - fields.base_offset,
            fields.base_timestamp,
            fields.max_timestamp,
            fields.producer_id,
            fields.producer_epoch,
            fields.base_sequence,
            fields.record_count,
        )
    )
    crc = crc32c.crc32c(bytes(header[ATTRIBUTES_POS:]) + records)
    _UINT32.pack_into(header, CRC_POS, crc)
    return bytes(header) + records
