"""RecordBatch v2 header parsing, validation and building."""

from __future__ import annotations

import datetime
import io

import crc32c
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64

from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import ControlRecordType
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key
from protocol.record_batch import iter_batch_headers
from protocol.record_batch import parse_control_record_key
from protocol.record_batch import parse_header
from protocol.record_batch import rewrite_base_offset
from protocol.record_batch import rewrite_partition_leader_epoch
from protocol.record_batch import scan_batches
from protocol.record_batch import validate_batches
from protocol.record_batch import whole_batches_end

TS = 1_700_000_000_000

maybe_bytes = st.none() | st.binary(max_size=40)
records_st = st.lists(
    st.builds(
        NewRecord,
        key=maybe_bytes,
        value=maybe_bytes,
        headers=st.lists(st.tuples(st.binary(max_size=8), maybe_bytes), max_size=3),
        timestamp_ms=st.none() | st.integers(TS - 10_000, TS + 10_000),
    ),
    min_size=1,
    max_size=6,
)


Made = tuple[bytes, list[NewRecord], dict[str, int]]


@st.composite
def batch_st(draw: st.DrawFn) -> Made:
    records = draw(records_st)
    fields = {
        "timestamp_ms": draw(st.integers(TS - 10_000, TS + 10_000)),
        "base_offset": draw(st.integers(0, 2**40)),
        "producer_id": draw(st.integers(-1, 2**40)),
        "producer_epoch": draw(st.integers(-1, 2**15 - 1)),
        "base_sequence": draw(st.integers(-1, 2**31 - 1)),
    }
    return build_batch(records, **fields), records, fields


blob_st = st.lists(batch_st(), min_size=1, max_size=4)


def _blob(batches: list[Made]) -> bytes:
    return b"".join(b for b, _, _ in batches)


def test_header_size_and_field_positions() -> None:
    data = build_batch([(b"k", b"v")], timestamp_ms=TS, base_offset=7)
    header = parse_header(data)
    assert BATCH_HEADER_SIZE == 61
    assert header.size == len(data)
    assert (header.base_offset, header.record_count, header.last_offset) == (7, 1, 7)
    assert header.crc == crc32c.crc32c(data[ATTRIBUTES_POS:])


@given(blob_st)
def test_validate_accepts_valid_blobs_and_returns_headers(batches: list[Made]) -> None:
    headers = validate_batches(_blob(batches))
    assert len(headers) == len(batches)
    for header, (data, records, fields) in zip(headers, batches, strict=True):
        assert header.size == len(data)
        assert header.record_count == len(records) == header.last_offset_delta + 1
        assert header.base_offset == fields["base_offset"]
        assert header.producer_id == fields["producer_id"]
        assert header.base_sequence == fields["base_sequence"]
        stamps = [r.timestamp_ms or fields["timestamp_ms"] for r in records]
        assert header.max_timestamp == max(
            fields["timestamp_ms"] if s is None else s for s in stamps
        )
        assert not header.is_control and header.compression == 0


@given(batch_st())
def test_build_batch_decodes_with_kio(batch: Made) -> None:
    data, records, fields = batch
    decoded, size = read_batch(data, 0)
    assert size == len(data)
    assert decoded.base_offset == fields["base_offset"]
    assert [(r.key, r.value) for r in decoded.records] == [(r.key, r.value) for r in records]
    assert [r.offset for r in decoded.records] == [
        fields["base_offset"] + i for i in range(len(records))
    ]
    for got, want in zip(decoded.records, records, strict=True):
        assert [(h.key, h.value) for h in got.headers] == list(want.headers)
        stamp = fields["timestamp_ms"] if want.timestamp_ms is None else want.timestamp_ms
        assert int(got.timestamp.timestamp()) == stamp // 1000  # kio keeps whole seconds


def test_kio_written_batches_validate() -> None:
    when = TZAwareMicros.parse(datetime.datetime.fromtimestamp(TS / 1000, datetime.UTC))
    records = tuple(
        Record(attributes=i8(0), timestamp=when, offset=i64(i), key=b"k", value=b"v", headers=())
        for i in range(3)
    )
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(5),
            producer_epoch=i16(1),
            base_sequence=i32(0),
            records=records,
            attributes=i16(0),
        ),
    )
    (header,) = validate_batches(buf.getvalue())
    assert header.record_count == 3 and header.producer_id == 5


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(blob_st, st.data())
def test_any_flipped_byte_after_base_offset_and_length_is_rejected(
    batches: list[Made],
    data: st.DataObject,
) -> None:
    blob = bytearray(_blob(batches))
    starts = [0]
    for b, _, _ in batches:
        starts.append(starts[-1] + len(b))
    which = data.draw(st.integers(0, len(batches) - 1))
    # Byte 12 onwards except partitionLeaderEpoch (12..15), which the CRC does not cover
    # either; the length field (8..11) is included because it must tile the buffer.
    pos = data.draw(
        st.sampled_from(
            [
                p
                for p in range(starts[which] + 8, starts[which + 1])
                if not 12 <= p - starts[which] < 16
            ]
        )
    )
    blob[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(InvalidRecordBatch):
        validate_batches(blob)


@given(blob_st, st.data())
def test_truncation_anywhere_is_rejected(batches: list[Made], data: st.DataObject) -> None:
    blob = _blob(batches)
    boundaries = {sum(len(b) for b, _, _ in batches[:i]) for i in range(1, len(batches))}
    # A cut exactly between batches leaves a valid, shorter blob.
    cut = data.draw(st.integers(0, len(blob) - 1).filter(lambda c: c not in boundaries))
    with pytest.raises(InvalidRecordBatch):
        validate_batches(blob[:cut])


@given(blob_st, st.integers(0, 2**62), st.integers(-1, 2**31 - 1))
def test_rewrites_keep_crc_valid(batches: list[Made], offset: int, epoch: int) -> None:
    blob = bytearray(_blob(batches))
    pos = 0
    for b, _, _ in batches:
        rewrite_base_offset(blob, pos, offset)
        rewrite_partition_leader_epoch(blob, pos, epoch)
        pos += len(b)
    headers = validate_batches(blob)
    assert {h.base_offset for h in headers} == {offset}
    assert {h.partition_leader_epoch for h in headers} == {epoch}


@given(st.binary(max_size=300))
def test_random_bytes_raise_only_invalid_record_batch(junk: bytes) -> None:
    try:
        validate_batches(junk)
    except InvalidRecordBatch as exc:
        assert exc.reason
    try:
        scan_batches(junk)
        list(iter_batch_headers(junk))
    except InvalidRecordBatch:
        pass
    assert 0 <= whole_batches_end(junk) <= len(junk)


@given(st.binary(min_size=61, max_size=61))
def test_random_header_bytes(junk: bytes) -> None:
    # Make most of them reach the later checks by forcing magic 2 and a sane length.
    forced = bytearray(junk)
    forced[16] = 2
    forced[8:12] = (49).to_bytes(4, "big")
    with pytest.raises(InvalidRecordBatch):
        validate_batches(forced)


def test_specific_rejections() -> None:
    good = build_batch([(b"k", b"v")], timestamp_ms=TS)
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(InvalidRecordBatch) as info:
        validate_batches(bad_magic)
    assert info.value.reason == "magic"
    short = bytearray(good)
    short[8:12] = (48).to_bytes(4, "big")
    with pytest.raises(InvalidRecordBatch) as info:
        parse_header(short)
    assert info.value.reason == "length"
    with pytest.raises(InvalidRecordBatch) as info:
        validate_batches(good + good[:20])
    assert info.value.reason == "length"
    with pytest.raises(InvalidRecordBatch):
        validate_batches(b"")


def test_scan_and_iter_stop_at_partial_tail() -> None:
    one = build_batch([(b"a", b"b")], timestamp_ms=TS, base_offset=0)
    two = build_batch([(b"c", b"d"), (b"e", b"f")], timestamp_ms=TS, base_offset=1)
    blob = one + two
    for cut in range(len(one), len(blob)):
        assert [p for p, _ in iter_batch_headers(blob[:cut])] == [0]
        result = scan_batches(blob[:cut], expected_offset=0)
        assert (result.end, result.stop_reason) == (
            len(one),
            None if cut == len(one) else "truncated",
        )
        assert whole_batches_end(blob[:cut]) == len(one)
    result = scan_batches(blob, expected_offset=0)
    assert (result.end, result.stop_reason, len(result.batches)) == (len(blob), None, 2)
    gap = scan_batches(blob, expected_offset=5)
    assert (gap.end, gap.stop_reason) == (0, "offset")


def test_control_batch() -> None:
    key = control_record_key(ControlRecordType.COMMIT)
    data = build_control_batch(10, 7, 2, TS, [(key, b"\x00\x00\x00\x00\x00\x00")])
    (header,) = validate_batches(data)
    assert header.is_control and not header.is_transactional
    assert (header.base_offset, header.producer_id, header.producer_epoch) == (10, 7, 2)
    decoded, _ = read_batch(data, 0)
    assert parse_control_record_key(decoded.records[0].key or b"") == (0, 1)
    assert header.size == len(data) and header.batch_length == len(data) - LOG_OVERHEAD


def _with(batch: bytes, pos: int, value: bytes, *, reseal: bool = True) -> bytearray:
    """`batch` with `value` at `pos`, its CRC made to match again unless `reseal` is false."""
    out = bytearray(batch)
    out[pos : pos + len(value)] = value
    if reseal:
        out[17:21] = crc32c.crc32c(out[ATTRIBUTES_POS:]).to_bytes(4, "big")
    return out


@pytest.mark.parametrize("size", [1, 20_000])  # a small blob is sliced, a large one viewed
def test_each_refusal_names_its_reason(size: int) -> None:
    good = build_batch([(b"k", b"v" * size)], timestamp_ms=TS)
    attributes = good[ATTRIBUTES_POS : ATTRIBUTES_POS + 2]
    cases = {
        "magic": _with(good, 16, b"\x01"),
        "length": good + good[:-1],  # a second batch that overruns the blob
        "crc": _with(good, len(good) - 1, bytes([good[-1] ^ 1]), reseal=False),
        # recordCount (57..60) and lastOffsetDelta (23..26) disagree, or count is 0
        "count": _with(good, 57, (0).to_bytes(4, "big")),
        "compression": _with(good, ATTRIBUTES_POS, bytes([attributes[0], attributes[1] | 7])),
    }
    for reason, blob in cases.items():
        with pytest.raises(InvalidRecordBatch) as info:
            validate_batches(blob)
        assert info.value.reason == reason, blob[:70]
    assert [h.record_count for h in validate_batches(good + good)] == [1, 1]
