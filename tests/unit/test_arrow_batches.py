"""`client.arrow_batches` (vectorised, into Arrow) against `client.records.decode_acquired`
(one record at a time): the same records from any fetch, compressed or not, or the same error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import cramjam
import pytest
from hypothesis import HealthCheck
from hypothesis import event
from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from client.errors import KafkaError
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import decode_acquired
from protocol.codecs import MAX_DECOMPRESSED_BYTES
from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import CONTROL_MASK
from protocol.record_batch import CRC_POS
from protocol.record_batch import LENGTH_POS
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import TIMESTAMP_TYPE_MASK
from protocol.record_batch import Compression
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import encode_varint
from protocol.records import StoredBatch
from protocol.records import build_stored_batch

pa = pytest.importorskip("pyarrow")
from client import arrow_batches  # noqa: E402
from client.arrow_batches import SCHEMA  # noqa: E402
from client.arrow_batches import acquired_to_arrow  # noqa: E402
from client.arrow_batches import batches_to_arrow  # noqa: E402
from tests.hypothesis_profiles import examples  # noqa: E402

TOPIC, PARTITION = "orders", 3


@dataclass(frozen=True)
class GenRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[bytes | None, bytes | None]]
    timestamp_delta: int
    offset_gap: int  # offsets skipped before this record (a compacted log has gaps)


def _nullable(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def _encode(r: GenRecord, offset_delta: int) -> bytes:
    body = b"\x00" + encode_varint(r.timestamp_delta) + encode_varint(offset_delta)
    body += _nullable(r.key) + _nullable(r.value) + encode_varint(len(r.headers))
    body += b"".join(_nullable(k) + _nullable(v) for k, v in r.headers)
    return encode_varint(len(body)) + body


def _batch(base: int, records: list[GenRecord], codec: int, log_append: bool) -> bytes:
    deltas, delta = [], -1
    for r in records:
        delta += 1 + r.offset_gap
        deltas.append(delta)
    encoded = b"".join(_encode(r, d) for r, d in zip(records, deltas, strict=True))
    fields = StoredBatch(
        base_offset=base,
        last_offset=base + deltas[-1],
        attributes=codec | (TIMESTAMP_TYPE_MASK if log_append else 0),
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_099_999,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=len(records),
    )
    return build_stored_batch(fields, encoded)


blobs = st.none() | st.binary(max_size=40)
records = st.builds(
    GenRecord,
    key=blobs,
    # ~8 KiB values make 3-byte record lengths
    value=st.none() | st.binary(max_size=300) | st.integers(8200, 8300).map(b"v".__mul__),
    headers=st.lists(
        st.tuples(st.none() | st.text(max_size=8).map(str.encode) | st.binary(max_size=4), blobs),
        max_size=3,
    ),
    timestamp_delta=st.integers(-2_000_000_000_000, 2**40),
    offset_gap=st.sampled_from([0, 0, 0, 1, 5]),
)
batch_specs = st.tuples(
    st.lists(records, min_size=1, max_size=20),
    st.sampled_from(list(Compression)),
    st.booleans(),  # log append time
    st.sampled_from([0, 0, 0, 1]),  # a control batch before this one
)


@st.composite
def fetches(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """Batches as a fetch returns them, and an offset window [first, last] around them."""
    out, start = [], draw(st.integers(0, 2**40))
    base = start
    for recs, codec, log_append, control in draw(st.lists(batch_specs, min_size=1, max_size=6)):
        if control:
            out.append(build_control_batch(base, 7, 0, 1, [(b"\x00\x00\x00\x01", b"x")]))
            base += 1
        batch = _batch(base, recs, codec, log_append)
        out.append(batch)
        base += 1 + struct.unpack_from(">i", batch, ATTRIBUTES_POS + 2)[0]
    data = b"".join(out)
    cut = draw(st.sampled_from([0, 0, 1, 30, 200]))  # the broker cuts at MaxBytes
    first = max(0, start + draw(st.integers(-3, base - start + 3)))
    last = first + draw(st.sampled_from([0, 2, 10, 50, 2**62]))
    return (data[: len(data) - cut] if cut < len(data) else data), first, last


def _expected(records: list[ConsumerRecord], shared: bool, headers: bool) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {
        "key": [r.key for r in records],
        "value": [r.value for r in records],
        "topic": [r.topic for r in records],
        "partition": [r.partition for r in records],
        "offset": [r.offset for r in records],
        "timestamp": [r.timestamp_ms * 1000 if r.timestamp_ms >= 0 else None for r in records],
        "timestampType": [r.timestamp_type for r in records],
        "deliveryCount": [r.delivery_count if shared else None for r in records],
    }
    if headers:
        cols["headers"] = [[{"key": k, "value": v} for k, v in r.headers] for r in records]
    return cols


def _actual(rb: Any) -> dict[str, list[Any]]:
    cols = rb.to_pydict()
    cols["timestamp"] = rb.column("timestamp").cast(pa.int64()).to_pylist()
    return dict(cols)


def _both(
    data: bytes, first: int, last: int, dc: int | None, headers: bool
) -> tuple[Any, list[ConsumerRecord] | None]:
    """Each decoder's answer, or the KafkaError it raised; the fast one's ways of finding
    records and headers (numpy steps across records, runs of one size within a batch, or plain
    Python) must agree too."""
    answers: list[Any] = []
    m = arrow_batches
    saved = m._LOCKSTEP_MIN_BATCHES, m._FEW_RECORDS, m._STRIDE_MIN_RUN
    never = 10**9
    for m._LOCKSTEP_MIN_BATCHES, m._FEW_RECORDS, m._STRIDE_MIN_RUN in (
        saved,  # as configured
        (1, 1, 64),  # numpy steps across batches and across headers
        (never, never, 1),  # runs of one size only, however short
        (never, never, never),  # plain Python
    ):
        try:
            answers.append(
                batches_to_arrow(
                    data,
                    topic=TOPIC,
                    partition=PARTITION,
                    first=first,
                    last=last,
                    delivery_count=dc,
                    include_headers=headers,
                )
            )
        except KafkaError as e:
            answers.append(e)
        finally:
            m._LOCKSTEP_MIN_BATCHES, m._FEW_RECORDS, m._STRIDE_MIN_RUN = saved
    *others, fast = answers
    for other in others:
        if isinstance(fast, KafkaError):
            assert isinstance(other, KafkaError)
            assert other.error_code == fast.error_code
        else:
            assert other.equals(fast)
    try:
        ref: Any = decode_acquired(TOPIC, PARTITION, data, [AcquiredRange(first, last, dc or 1)])
    except KafkaError as e:
        ref = e
    return fast, ref


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetch=fetches(), dc=st.none() | st.integers(1, 5), headers=st.booleans())
def test_agrees_with_the_reference(
    fetch: tuple[bytes, int, int], dc: int | None, headers: bool
) -> None:
    data, first, last = fetch
    fast, ref = _both(data, first, last, dc, headers)
    assert not isinstance(fast, KafkaError) and not isinstance(ref, KafkaError), (fast, ref)
    assert fast.schema == (SCHEMA if headers else SCHEMA.remove(SCHEMA.get_field_index("headers")))
    assert _actual(fast) == _expected(ref, dc is not None, headers)
    event(f"{'some' if ref else 'no'} records in the window")


@settings(max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fetch=fetches(), cuts=st.lists(st.integers(0, 40), max_size=10), data=st.data())
def test_acquired_ranges_agree_with_the_reference(
    fetch: tuple[bytes, int, int], cuts: list[int], data: st.DataObject
) -> None:
    """Several acquired ranges (a ShareFetch's), each with its delivery count, in one pass."""
    records, first, _ = fetch
    points = sorted({first + c for c in cuts})
    ranges = [
        AcquiredRange(a, b, data.draw(st.integers(1, 9)))
        for a, b in zip(points[::2], points[1::2], strict=False)
    ]
    ref = decode_acquired(TOPIC, PARTITION, records, ranges)
    fast = acquired_to_arrow(
        records,
        topic=TOPIC,
        partition=PARTITION,
        acquired=[(r.first_offset, r.last_offset, r.delivery_count) for r in ranges],
    )
    assert _actual(fast) == _expected(ref, True, True)


@settings(max_examples=examples(100), deadline=None)
@given(
    batch=st.tuples(st.lists(records, min_size=1, max_size=5), st.sampled_from(list(Compression))),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
)
@example(  # found in CI: a header's length flipped below int64's range (OverflowError)
    batch=(
        [
            GenRecord(b"\x00", b"\x00", [(b"\xc2\x80\xc2\x80\xf0\x90\x80\x800", None)], 64, 0),
            GenRecord(None, None, [], 8192, 0),
        ],
        Compression.NONE,
    ),
    flips=[(49690, 128)],
)
def test_damaged_records_are_refused_alike(
    batch: tuple[list[GenRecord], Compression], flips: list[tuple[int, int]]
) -> None:
    """Damage inside the records (behind a valid CRC): both refuse it, or both read the same."""
    recs, codec = batch
    good = bytearray(_batch(0, recs, Compression.NONE, False))
    body = good[BATCH_HEADER_SIZE:]
    for pos, xor in flips:
        body[pos % len(body)] ^= xor
    damaged = _restamp(good[:BATCH_HEADER_SIZE], bytes(body), codec)
    fast, ref = _both(damaged, 0, 2**63 - 1, 1, True)
    if isinstance(ref, KafkaError):
        assert isinstance(fast, KafkaError)
        assert fast.error_code == ref.error_code == ErrorCode.corrupt_message
    else:
        assert not isinstance(fast, KafkaError), fast
        assert _actual(fast) == _expected(ref, True, True)


def _restamp(header: bytearray, records: bytes, codec: int) -> bytes:
    """A batch with `header`'s fields around `records` (compressed with `codec`), CRC fixed."""
    (count,) = struct.unpack_from(">i", header, BATCH_HEADER_SIZE - 4)
    fields = StoredBatch(
        base_offset=0,
        last_offset=struct.unpack_from(">i", header, ATTRIBUTES_POS + 2)[0],
        attributes=codec,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
    )
    return build_stored_batch(fields, records)


def _one_batch(codec: int = 0) -> bytes:
    rec = GenRecord(b"k", b"v" * 50, [(b"h", b"x")], 0, 0)
    return _batch(10, [rec, rec], codec, False)


def test_bad_crc_is_corrupt_message() -> None:
    data = bytearray(_one_batch())
    data[-1] ^= 1
    for fast_or_ref in _both(bytes(data), 0, 2**63 - 1, 1, True):
        assert isinstance(fast_or_ref, KafkaError)
        assert fast_or_ref.error_code == ErrorCode.corrupt_message


def test_unknown_codec_is_unsupported_compression() -> None:
    data = bytearray(_one_batch())
    data[ATTRIBUTES_POS + 1] |= 5
    _fix_crc(data)
    for fast_or_ref in _both(bytes(data), 0, 2**63 - 1, 1, True):
        assert isinstance(fast_or_ref, KafkaError)
        assert fast_or_ref.error_code == ErrorCode.unsupported_compression_type


def test_decompression_bomb_is_refused() -> None:
    bomb = bytes(cramjam.zstd.compress(bytes(MAX_DECOMPRESSED_BYTES + 1)))
    header = bytearray(_one_batch()[:BATCH_HEADER_SIZE])
    data = bytearray(header + bomb)
    struct.pack_into(">i", data, LENGTH_POS, len(data) - LOG_OVERHEAD)
    data[ATTRIBUTES_POS + 1] = Compression.ZSTD
    _fix_crc(data)
    for fast_or_ref in _both(bytes(data), 0, 2**63 - 1, 1, True):
        assert isinstance(fast_or_ref, KafkaError)
        assert fast_or_ref.error_code == ErrorCode.corrupt_message


def _fix_crc(batch: bytearray) -> None:
    import crc32c

    struct.pack_into(">I", batch, CRC_POS, crc32c.crc32c(bytes(batch[ATTRIBUTES_POS:])))


def test_raw_snappy_as_librdkafka_writes_it() -> None:
    """librdkafka's snappy has no xerial framing; Java's has (protocol.codecs writes that)."""
    plain = _one_batch()
    data = bytearray(
        plain[:BATCH_HEADER_SIZE] + bytes(cramjam.snappy.compress_raw(plain[BATCH_HEADER_SIZE:]))
    )
    struct.pack_into(">i", data, LENGTH_POS, len(data) - LOG_OVERHEAD)
    data[ATTRIBUTES_POS + 1] = Compression.SNAPPY
    _fix_crc(data)
    rb = batches_to_arrow(bytes(data), topic=TOPIC, partition=PARTITION)
    assert rb.column("offset").to_pylist() == [10, 11]
    assert rb.column("value").to_pylist() == [b"v" * 50] * 2
    assert [r.value for r in decode_acquired(TOPIC, 0, data, [AcquiredRange(0, 99, 1)])] == [
        b"v" * 50
    ] * 2


def test_control_batches_and_nothing_in_window() -> None:
    data = build_control_batch(0, 1, 0, 5, [(b"\x00\x00\x00\x01", b"")]) + build_batch(
        [(b"k", b"v")], timestamp_ms=5, base_offset=1
    )
    assert batches_to_arrow(data, topic=TOPIC, partition=0).column("offset").to_pylist() == [1]
    assert batches_to_arrow(data, topic=TOPIC, partition=0, first=2).num_rows == 0
    assert batches_to_arrow(b"", topic=TOPIC, partition=0).schema == SCHEMA
    assert CONTROL_MASK  # control batches are the ones with this bit


def test_schema_is_the_arrow_form_of_the_spark_sources() -> None:
    """What Spark expects from `read()` for spark/rows.py's SCHEMA, field for field."""
    types = pytest.importorskip("pyspark.sql.pandas.types")
    from spark.rows import SCHEMA as SPARK_SCHEMA

    assert SCHEMA.equals(types.to_arrow_schema(SPARK_SCHEMA, timezone="UTC"), check_metadata=True)


# Records of a few sizes in runs, as producers of fixed-size values write them: what the
# decoder's runs-of-one-size walk (`_walk`) takes in numpy steps.
sized_runs = st.lists(
    st.tuples(
        st.sampled_from([None, b"", b"k" * 3]),  # key
        st.sampled_from([None, b"", b"v" * 60, b"v" * 61, b"v" * 200, b"v" * 8300]),  # value
        st.integers(1, 150),  # records in the run
        st.sampled_from([0, 0, 0, 1]),  # an offset gap before each record of the run
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(sized_runs, min_size=1, max_size=3), cut=st.sampled_from([0, 0, 7]))
def test_runs_of_one_size_agree_with_the_reference(
    runs: list[list[tuple[bytes | None, bytes | None, int, int]]], cut: int
) -> None:
    data, base = b"", 0
    for batch_runs in runs:
        recs = [
            GenRecord(key, value, [], 5 * i, gap)
            for key, value, n, gap in batch_runs
            for i in range(n)
        ]
        batch = _batch(base, recs, Compression.NONE, False)
        data += batch
        base += 1 + struct.unpack_from(">i", batch, ATTRIBUTES_POS + 2)[0]
    data = data[: len(data) - cut]
    fast, ref = _both(data, 0, 2**63 - 1, None, True)
    assert not isinstance(fast, KafkaError) and not isinstance(ref, KafkaError), (fast, ref)
    assert _actual(fast) == _expected(ref, False, True)
