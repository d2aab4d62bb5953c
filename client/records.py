"""Record batches on the client side: building them with kio for Produce, decoding fetched ones.

Decoding happens here and only here: the consumer must look at records, the broker never does.
"""

from __future__ import annotations

import bisect
import datetime
import io
import struct
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordHeader
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.serial.readers import read_signed_varint
from kio.serial.readers import read_signed_varlong
from kio.static.primitive import TZAwareMicros
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64

from client.errors import KafkaError

# v2 batch header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, count.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12  # baseOffset + batchLength precede the length-counted part
_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_CONTROL_BIT = 0x20
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class Record:
    """A record to produce."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """A record delivered to a share consumer, with the delivery count of its acquisition."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp_ms: int = -1
    timestamp_type: int = CREATE_TIME
    delivery_count: int = 1


def _timestamp(ms: int) -> TZAwareMicros:
    # kio writes int(ts.timestamp() * 1000); float rounding can land just below a whole
    # millisecond, so aim at the middle of it and let int() truncate to the intended value.
    return TZAwareMicros.parse(_EPOCH + datetime.timedelta(milliseconds=ms, microseconds=500))


def encode_batch(records: Sequence[Record], now_ms: int) -> bytes:
    """One uncompressed v2 batch, no producer id (not idempotent), offsets 0..n-1."""
    if not records:
        raise ValueError("a batch needs at least one record")
    kio_records = tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=_timestamp(now_ms if r.timestamp_ms is None else r.timestamp_ms),
            offset=i64(i),
            key=r.key,
            value=r.value,
            headers=tuple(RecordHeader(key=k.encode(), value=v) for k, v in r.headers),
        )
        for i, r in enumerate(records)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        records=kio_records,
        attributes=i16(0),
    )
    buf = io.BytesIO()
    write_new_batch(buf, batch)
    return buf.getvalue()


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcquiredData:
    """What one ShareFetch brought for one partition: the acquired ranges and the stored
    batches holding them, undecoded (a reader that plans by ranges never looks inside)."""

    topic: str
    partition: int
    ranges: tuple[AcquiredRange, ...]
    data: bytes


class _Ranges:
    """Acquired ranges sorted by first offset, for offset lookups by bisection."""

    def __init__(self, ranges: Sequence[AcquiredRange]) -> None:
        self._ranges = sorted(ranges, key=lambda r: r.first_offset)
        self._firsts = [r.first_offset for r in self._ranges]

    def find(self, offset: int) -> AcquiredRange | None:
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i >= 0 and self._ranges[i].last_offset >= offset:
            return self._ranges[i]
        return None

    def overlaps(self, first: int, last: int) -> bool:
        i = bisect.bisect_right(self._firsts, last) - 1
        return i >= 0 and self._ranges[i].last_offset >= first


def _timestamp_deltas(buf: bytes, pos: int, count: int) -> Iterator[int]:
    """Each record's timestamp delta: kio's Record keeps whole seconds only."""
    for _ in range(count):
        length, size = read_signed_varint(buf, pos)
        delta, _ = read_signed_varlong(buf, pos + size + 1)  # after the attributes byte
        yield int(delta)
        pos += size + int(length)


def decode_acquired(
    topic: str, partition: int, data: bytes, acquired: Sequence[AcquiredRange]
) -> list[ConsumerRecord]:
    """The records of `data` (stored batches as the broker returned them) that we acquired.

    Control batches and records outside the acquired ranges are dropped; a truncated batch at
    the end (the broker may cut at MaxBytes) is ignored.
    """
    ranges = _Ranges(acquired)
    out: list[ConsumerRecord] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        (base, length, _, magic, _, attrs, last_delta, base_ts, max_ts, *_, count) = (
            _HEADER.unpack_from(data, pos)
        )
        end = pos + _LOG_OVERHEAD + length
        if end > len(data):
            break
        if magic != 2:
            raise KafkaError(ErrorCode.corrupt_message, f"record batch magic {magic}")
        if attrs & _CONTROL_BIT or not ranges.overlaps(base, base + last_delta):
            pos = end
            continue
        if attrs & _COMPRESSION_MASK:
            raise KafkaError(
                ErrorCode.unsupported_compression_type, "compressed batches are not supported"
            )
        batch, _ = read_batch(data, pos)
        log_append = bool(attrs & _TIMESTAMP_TYPE_BIT)
        deltas = _timestamp_deltas(data, pos + _HEADER.size, count)
        for rec, delta in zip(batch.records, deltas, strict=True):
            acquired_range = ranges.find(int(rec.offset))
            if acquired_range is None:
                continue
            out.append(
                ConsumerRecord(
                    topic=topic,
                    partition=partition,
                    offset=int(rec.offset),
                    key=rec.key,
                    value=rec.value,
                    headers=[
                        ((h.key or b"").decode("utf-8", "replace"), h.value) for h in rec.headers
                    ],
                    timestamp_ms=max_ts if log_append else base_ts + delta,
                    timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                    delivery_count=acquired_range.delivery_count,
                )
            )
        pos = end
    return out
