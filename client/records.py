"""Record batches on the client side: building them with kio for Produce, decoding fetched ones.

Records are decoded on the client only (here, and all at once into Arrow in `client.arrow_batches`):
the consumer must look at records, the broker never does.
"""

from __future__ import annotations

import bisect
import datetime
import io
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64

from client.fetched_batches import FetchedBatch
from client.fetched_batches import corrupt
from client.fetched_batches import fetched_batches
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import Buffer
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import parse_header
from protocol.record_batch import read_varint
from protocol.records import StoredBatch
from protocol.records import build_stored_batch

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

CREATE_TIME = 0
LOG_APPEND_TIME = 1

Header = tuple[str, bytes | None]
# timestamp delta, key, value, headers
ParsedRecord = tuple[int, bytes | None, bytes | None, list[Header]]


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


def encode_batch(records: Sequence[Record], now_ms: int, codec: int = 0) -> bytes:
    """One v2 batch, no producer id (not idempotent), offsets 0..n-1, its records compressed
    with `codec` (Kafka's compression.type id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    plain = _encode_plain(records, now_ms)
    if not codec:
        return plain
    h = parse_header(plain)
    fields = StoredBatch(
        base_offset=0,
        last_offset=h.last_offset_delta,
        attributes=h.attributes | codec,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        record_count=h.record_count,
    )
    return build_stored_batch(fields, plain[BATCH_HEADER_SIZE:])


def _encode_plain(records: Sequence[Record], now_ms: int) -> bytes:
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


def _nullable_bytes(data: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise corrupt(f"{length} bytes at {pos} run past their record")
    return bytes(data[pos : pos + length]), pos + length


def _record(data: Buffer, pos: int) -> tuple[int, int, ParsedRecord]:
    """The record at `pos`: its offset delta, where the next one starts, and its fields."""
    length, pos = read_varint(data, pos)
    end = pos + length
    if length < 1 or end > len(data):
        raise corrupt(f"record of {length} bytes at {pos}")
    ts_delta, p = read_varint(data, pos + 1)  # after the attributes byte
    offset_delta, p = read_varint(data, p)
    key, p = _nullable_bytes(data, p, end)
    value, p = _nullable_bytes(data, p, end)
    count, p = read_varint(data, p)
    if count < 0:
        raise corrupt(f"record at {pos} has {count} headers")
    headers: list[Header] = []
    for _ in range(count):
        h_key, p = _nullable_bytes(data, p, end)
        h_value, p = _nullable_bytes(data, p, end)
        headers.append(((h_key or b"").decode("utf-8", "replace"), h_value))
    if p != end:
        raise corrupt(f"record at {pos} ends at {p}, its length says {end}")
    return offset_delta, end, (ts_delta, key, value, headers)


def decode_acquired(
    topic: str, partition: int, data: Buffer, acquired: Sequence[AcquiredRange]
) -> list[ConsumerRecord]:
    """The records of `data` (stored batches as the broker returned them) that we acquired.

    Control batches and records outside the acquired ranges are dropped; a truncated batch at
    the end (the broker may cut at MaxBytes) is ignored; compressed batches are decompressed.
    One record at a time: the reference that `client.arrow_batches` is tested against.

    :raises KafkaError: CORRUPT_MESSAGE for a batch or record that does not parse.
    """
    ranges = _Ranges(acquired)
    if not acquired:
        return []
    lo = min(r.first_offset for r in acquired)
    hi = max(r.last_offset for r in acquired)
    out: list[ConsumerRecord] = []
    for batch in fetched_batches(data, lo, hi):
        if not ranges.overlaps(batch.base_offset, batch.last_offset):
            continue
        out.extend(_acquired_records(topic, partition, batch, ranges))
    return out


def _acquired_records(
    topic: str, partition: int, batch: FetchedBatch, ranges: _Ranges
) -> Iterator[ConsumerRecord]:
    pos = 0
    try:
        for _ in range(batch.record_count):
            offset_delta, pos, (ts_delta, key, value, headers) = _record(batch.records, pos)
            offset = batch.base_offset + offset_delta
            acquired_range = ranges.find(offset)
            if acquired_range is None:
                continue
            yield ConsumerRecord(
                topic=topic,
                partition=partition,
                offset=offset,
                key=key,
                value=value,
                headers=headers,
                timestamp_ms=(
                    batch.max_timestamp
                    if batch.log_append_time
                    else batch.base_timestamp + ts_delta
                ),
                timestamp_type=LOG_APPEND_TIME if batch.log_append_time else CREATE_TIME,
                delivery_count=acquired_range.delivery_count,
            )
    except (IndexError, InvalidRecordBatch) as e:
        raise corrupt(f"batch at offset {batch.base_offset}: {e}") from e
