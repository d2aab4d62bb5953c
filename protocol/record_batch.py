"""RecordBatch v2 (magic 2): header parse/build and whole-batch validation.

Layout, from Kafka's DefaultRecordBatch.java
(``clients/src/main/java/org/apache/kafka/common/record/``)::

    baseOffset           int64   -- not covered by the CRC: the broker rewrites it
    batchLength          int32   -- bytes after this field (so batch size = batchLength + 12)
    partitionLeaderEpoch int32   -- not covered by the CRC either
    magic                int8    -- 2
    crc                  uint32  -- CRC32C of attributes .. end of batch
    attributes           int16   -- bits 0-2 compression, 3 timestampType, 4 isTransactional,
                                    5 isControlBatch, 6 hasDeleteHorizonMs
    lastOffsetDelta      int32
    baseTimestamp        int64
    maxTimestamp         int64
    producerId           int64
    producerEpoch        int16
    baseSequence         int32
    recordCount          int32   -- 61 bytes so far; the records follow

The broker only ever looks at this header: records stay opaque bytes on produce and fetch.
Encoding records is offered for the rare, small batches the broker writes itself (control
batches) and for tests.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple
from typing import NoReturn
from typing import TypeAlias

import crc32c

from protocol.errors import ProtocolException

_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = 61
assert _HEADER.size == BATCH_HEADER_SIZE, _HEADER.size

# Field positions, derived from the format rather than typed in.
BASE_OFFSET_POS = 0
LENGTH_POS = struct.calcsize(">q")
PARTITION_LEADER_EPOCH_POS = struct.calcsize(">qi")
MAGIC_POS = struct.calcsize(">qii")
CRC_POS = struct.calcsize(">qiib")
ATTRIBUTES_POS = struct.calcsize(">qiibI")
LAST_OFFSET_DELTA_POS = struct.calcsize(">qiibIh")
RECORD_COUNT_POS = struct.calcsize(">qiibIhiqqqhi")
# baseOffset + batchLength: the part of a batch that batchLength does not count.
LOG_OVERHEAD = PARTITION_LEADER_EPOCH_POS
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
assert (LOG_OVERHEAD, CRC_POS, ATTRIBUTES_POS, RECORD_COUNT_POS) == (12, 17, 21, 57)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

MAGIC = 2
# validate_batches slices blobs up to this size (a copy) rather than making a memoryview.
_COPY_MAX = 4096
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
MAX_COMPRESSION = 4  # zstd; 5-7 are undefined
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

Buffer: TypeAlias = bytes | bytearray | memoryview


class InvalidRecordBatch(ProtocolException, ValueError):
    """A batch that fails validation; ``reason`` is one short word ("crc", "magic", ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class ControlRecordType(IntEnum):
    """Kafka's ControlRecordType values that matter to a data partition."""

    ABORT = 0
    COMMIT = 1


class BatchHeader(NamedTuple):
    """A batch header as stored; a tuple because one is made per batch on every append and
    every walk, and a frozen dataclass costs several times as much to build."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at int32 like Kafka."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def holds_data(self) -> bool:
        """Whether its records count as data: not a control batch (transaction markers,
        share state), not an empty one (the cleaner's record of removed offsets). Lag and
        ListOffsets MAX_TIMESTAMP count these batches only."""
        return not self.attributes & CONTROL_MASK and self.record_count > 0

    @property
    def timestamp(self) -> int:
        """The batch's earliest record timestamp as far as the header tells: the base
        timestamp (CreateTime), or the broker's append time (LogAppendTime, where the records'
        own timestamps are not used)."""
        return self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else self.base_timestamp


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; the records are not looked at.

    :raises InvalidRecordBatch: short buffer ("length"), magic != 2 ("magic"),
        batchLength below the header size ("length").
    """
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise InvalidRecordBatch("length", f"need {BATCH_HEADER_SIZE} header bytes at {pos}")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise InvalidRecordBatch("magic", f"magic {header.magic} at {pos}, expected {MAGIC}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecordBatch("length", f"batchLength {header.batch_length} at {pos}")
    return header


def _check_crc(view: memoryview, pos: int, header: BatchHeader) -> None:
    actual = crc32c.crc32c(view[pos + ATTRIBUTES_POS : pos + header.size])
    if actual != header.crc:
        raise InvalidRecordBatch("crc", f"crc {actual:#x} != {header.crc:#x} at {pos}")


def _check_produce_fields(header: BatchHeader, pos: int) -> None:
    if header.record_count <= 0:
        raise InvalidRecordBatch("count", f"recordCount {header.record_count} at {pos}")
    # Clients send dense batches; anything else would make offsets disagree with records.
    if header.record_count != header.last_offset_delta + 1:
        raise InvalidRecordBatch(
            "count",
            f"recordCount {header.record_count} != lastOffsetDelta + 1 "
            f"({header.last_offset_delta + 1}) at {pos}",
        )
    if header.compression > MAX_COMPRESSION:
        raise InvalidRecordBatch("compression", f"codec {header.compression} at {pos}")


def validate_batches(buf: Buffer) -> list[BatchHeader]:
    """Check every batch of a Produce ``records`` blob; return their headers.

    Batches are walked by their length field only; each must be magic 2, carry a
    dense, non-empty offset range, a known codec and a valid CRC32C, and the batches
    must tile the buffer exactly.

    Every produce request comes through here, most with one small batch: the checks are
    one expression on the unpacked fields, and only a batch that fails them goes through
    the step-by-step checks that name the reason.

    :raises InvalidRecordBatch:
    """
    end = len(buf)
    if end == 0:
        raise InvalidRecordBatch("length", "no record batch")
    # Slicing a small buffer copies less than a memoryview costs to make.
    view = buf if end <= _COPY_MAX else memoryview(buf)
    headers: list[BatchHeader] = []
    pos = 0
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            parse_header(view, pos)  # raises "length"
        header = tuple.__new__(BatchHeader, _HEADER.unpack_from(view, pos))  # _make, no frame
        _, length, _, magic, crc, attributes, delta, _, _, _, _, _, count = header
        size = length + LOG_OVERHEAD
        if not (
            magic == MAGIC
            and length >= MIN_BATCH_LENGTH
            and size <= end - pos
            and 0 < count == delta + 1
            and attributes & COMPRESSION_MASK <= MAX_COMPRESSION
            and crc32c.crc32c(view[pos + ATTRIBUTES_POS : pos + size]) == crc
        ):
            _refuse(view, pos, end)
        headers.append(header)
        pos += size
    return headers


def _refuse(view: Buffer, pos: int, end: int) -> NoReturn:
    """Raise the InvalidRecordBatch that names why the batch at ``pos`` is refused."""
    header = parse_header(view, pos)
    if header.size > end - pos:
        raise InvalidRecordBatch("length", f"batch of {header.size} bytes at {pos} overruns")
    _check_produce_fields(header, pos)
    _check_crc(memoryview(view), pos, header)
    raise AssertionError(f"batch at {pos} passes every check")  # pragma: no cover


def iter_batch_headers(buf: Buffer, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each whole batch from ``pos``, without CRC checks.

    Stops quietly at a partial tail (a torn write or the edge of a read); the valid
    prefix ends at the last yielded ``position + header.size``.

    :raises InvalidRecordBatch: on a header that cannot be a batch (magic, length).
    """
    end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        header = parse_header(buf, pos)
        size = header.batch_length + LOG_OVERHEAD  # `header.size`, inline: once per batch read
        if size > end - pos:
            return
        yield pos, header
        pos += size


def whole_batches_end(buf: Buffer, pos: int = 0) -> int:
    """End of the whole batches from ``pos`` (length fields only: the Fetch trim)."""
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        size = _INT32.unpack_from(buf, pos + LENGTH_POS)[0] + LOG_OVERHEAD
        if size <= LOG_OVERHEAD or size > end - pos:
            break
        pos += size
    return pos


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Outcome of ``scan_batches``: ``end`` is where the valid prefix stops.

    ``stop_reason`` is None when the scan reached the end of the buffer exactly,
    "truncated" at a partial tail, otherwise the InvalidRecordBatch reason.
    """

    batches: list[tuple[int, BatchHeader]]
    end: int
    stop_reason: str | None


def scan_batches(buf: Buffer, pos: int = 0, *, expected_offset: int | None = None) -> ScanResult:
    """Walk stored batches checking structure and CRC32C (recovery).

    With ``expected_offset`` each batch must start where the previous one ended:
    the CRC does not cover baseOffset, so continuity is its only check.
    """
    view = memoryview(buf)
    end = len(view)
    batches: list[tuple[int, BatchHeader]] = []
    reason: str | None = None
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            reason = "truncated"
            break
        try:
            header = parse_header(view, pos)
            if header.size > end - pos:
                reason = "truncated"
                break
            if expected_offset is not None and header.base_offset != expected_offset:
                raise InvalidRecordBatch("offset", f"baseOffset {header.base_offset} at {pos}")
            _check_crc(view, pos, header)
        except InvalidRecordBatch as exc:
            reason = exc.reason
            break
        batches.append((pos, header))
        if expected_offset is not None:
            expected_offset = header.last_offset + 1
        pos += header.size
    return ScanResult(batches, pos, reason)


def rewrite_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets in place; the CRC does not cover baseOffset, so it stays valid."""
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def rewrite_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place; outside the CRC like baseOffset."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_POS, epoch)


# --- building batches (control batches and tests; never on the produce path) ---------


class NewRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[bytes, bytes | None]] = ()
    timestamp_ms: int | None = None  # None: the batch timestamp


def encode_varint(value: int) -> bytes:
    """A zigzag varint, as records use."""
    if -64 <= value < 64:  # one byte: most lengths, deltas and counts
        return _ONE_BYTE_VARINTS[value + 64]
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


_ONE_BYTE_VARINTS = [bytes([((v << 1) ^ (v >> 63)) & 0xFF]) for v in range(-64, 64)]


def _nullable(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def _encode_record(record: NewRecord, offset_delta: int, base_timestamp: int) -> bytes:
    timestamp = base_timestamp if record.timestamp_ms is None else record.timestamp_ms
    body = bytearray(b"\x00")  # record attributes: unused
    body += encode_varint(timestamp - base_timestamp)
    body += encode_varint(offset_delta)
    body += _nullable(record.key)
    body += _nullable(record.value)
    body += encode_varint(len(record.headers))
    for key, value in record.headers:
        body += _nullable(key) + _nullable(value)
    return encode_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[NewRecord | tuple[bytes | None, bytes | None]],
    *,
    timestamp_ms: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode an uncompressed v2 batch with a valid CRC32C."""
    if not records:
        raise ValueError("a batch needs at least one record")
    recs = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    stamps = [timestamp_ms if r.timestamp_ms is None else r.timestamp_ms for r in recs]
    body = b"".join(_encode_record(r, i, timestamp_ms) for i, r in enumerate(recs))
    return seal_batch(
        body,
        len(recs),
        timestamp_ms=timestamp_ms,
        max_timestamp_ms=max(stamps),
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        attributes=attributes,
        partition_leader_epoch=partition_leader_epoch,
    )


def seal_batch(
    body: bytes,
    count: int,
    *,
    timestamp_ms: int,
    max_timestamp_ms: int | None = None,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """An uncompressed v2 batch around `count` records already encoded in `body` (offset
    deltas from 0), with a valid CRC32C: for callers that encode records faster themselves."""
    header = bytearray(
        _HEADER.pack(
            base_offset,
            BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes & ~COMPRESSION_MASK,
            count - 1,
            timestamp_ms,
            timestamp_ms if max_timestamp_ms is None else max_timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(bytes(header[ATTRIBUTES_POS:]) + body)
    _UINT32.pack_into(header, CRC_POS, crc)
    return bytes(header) + body


def control_record_key(record_type: int, version: int = 0) -> bytes:
    """Key of a control record: int16 version, int16 type (Kafka's ControlRecordType)."""
    return _INT16.pack(version) + _INT16.pack(record_type)


def parse_control_record_key(key: bytes) -> tuple[int, int]:
    """Return ``(version, type)`` of a control record key."""
    if len(key) < 4:
        raise InvalidRecordBatch("control", "control record key shorter than 4 bytes")
    return _INT16.unpack_from(key, 0)[0], _INT16.unpack_from(key, 2)[0]


def build_control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    records: Sequence[tuple[bytes | None, bytes | None]],
) -> bytes:
    """Encode a v2 control batch (attributes bit 5, uncompressed) of (key, value) records."""
    return build_batch(
        records,
        timestamp_ms=timestamp_ms,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=CONTROL_MASK,
    )


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varint (as records use) at `pos`: (value, position after it)."""
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecordBatch("length", "varint longer than 10 bytes")


def record_timestamps(batch: Buffer) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one uncompressed batch.

    Only ListOffsets by timestamp uses this, on the one batch it has found: it reads the
    first fields of each record and skips the rest, and never runs on produce or fetch.

    :raises InvalidRecordBatch: the batch is compressed, or its records do not parse.
    """
    header = parse_header(batch)
    if header.compression:
        raise InvalidRecordBatch("compression", "records of a compressed batch")
    view = memoryview(batch)
    pos = BATCH_HEADER_SIZE
    try:
        for _ in range(header.record_count):
            length, body = read_varint(view, pos)
            ts_delta, p = read_varint(view, body + 1)  # after the attributes byte
            offset_delta, _ = read_varint(view, p)
            yield header.base_offset + offset_delta, header.base_timestamp + ts_delta
            pos = body + length
    except IndexError as e:
        raise InvalidRecordBatch("truncated", "record runs past the batch") from e
