"""Record codecs in Kafka's formats: round trips, snappy's two framings, lz4 frames, bad data.

Batches are checked through `decode_records` too: a batch built with each codec by
`build_stored_batch` reads back record for record.
"""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from protocol import codecs
from protocol.codecs import XERIAL_BLOCK_BYTES
from protocol.codecs import XERIAL_HEADER
from protocol.codecs import compress
from protocol.codecs import decompress
from protocol.record_batch import Compression
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import parse_header
from protocol.record_batch import validate_batches
from protocol.records import StoredBatch
from protocol.records import build_stored_batch
from protocol.records import decode_records
from protocol.records import encode_run
from tests.hypothesis_profiles import examples

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@given(data=st.binary(max_size=3 * XERIAL_BLOCK_BYTES))
@settings(max_examples=examples(40), deadline=None)
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@given(
    pairs=st.lists(
        st.tuples(st.binary(min_size=1, max_size=20), st.none() | st.binary(max_size=200)),
        min_size=1,
        max_size=50,
    )
)
@settings(max_examples=examples(25), deadline=None)
def test_batch_of_each_codec_reads_back_record_for_record(
    codec: Compression, pairs: list[tuple[bytes, bytes | None]]
) -> None:
    plain = build_batch(list(pairs), timestamp_ms=1000)
    _, records = decode_records(plain)
    fields = StoredBatch(
        base_offset=0, last_offset=len(records) - 1, attributes=codec, base_timestamp=1000,
        max_timestamp=1000, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        record_count=len(records),
    )  # fmt: skip
    batch = build_stored_batch(fields, encode_run(records, 0))
    validate_batches(batch)  # CRC and lengths hold
    header, again = decode_records(batch)
    assert header.compression == codec
    assert again == records


def test_snappy_is_written_in_xerial_framing_in_32_kib_blocks() -> None:
    data = bytes(range(256)) * 300  # 76,800 bytes: three blocks
    out = compress(Compression.SNAPPY, data)
    assert out.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    pos, blocks = len(XERIAL_HEADER), []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32768, 32768, 11264]
    assert b"".join(blocks) == data


def test_snappy_raw_as_librdkafka_sends_it_is_read() -> None:
    data = b"librdkafka sends raw snappy " * 100
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_concatenated_xerial_streams_are_read_as_one() -> None:
    first, second = b"a" * 1000, b"b" * 1000
    both = compress(Compression.SNAPPY, first) + compress(Compression.SNAPPY, second)
    assert decompress(Compression.SNAPPY, both) == first + second


def test_lz4_is_a_frame_with_independent_blocks_as_kafka_writes() -> None:
    out = compress(Compression.LZ4, b"x" * 200_000)
    assert out[:4] == b"\x04\x22\x4d\x18"  # the LZ4 frame magic
    flg = out[4]
    assert flg >> 6 == 1 and flg & 0x20  # version 01, blocks independent
    assert not flg & 0x04  # no content checksum (Kafka's writer sets none)
    assert out[5] == 0x40  # 64 KiB blocks


def test_gzip_members_concatenated_are_read_as_one() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, data) == b"first second"


def test_zstd_frame_from_another_writer_is_read() -> None:
    data = b"zstd " * 1000
    assert decompress(Compression.ZSTD, bytes(cramjam.zstd.compress(data, level=19))) == data


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize(
    "garbage",
    [b"", b"not compressed at all", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff"],
)
def test_data_that_does_not_decompress_is_an_invalid_batch(
    codec: Compression, garbage: bytes
) -> None:
    try:
        out = decompress(codec, garbage)
    except InvalidRecordBatch as e:
        assert e.reason == "compression"
    else:
        assert out == b""  # an empty stream is empty, never a crash


def test_corrupt_payload_fails_the_batch_not_the_caller() -> None:
    batch = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1000))
    struct.pack_into(">h", batch, 21, Compression.ZSTD)  # flagged zstd, holds plain records
    with pytest.raises(InvalidRecordBatch):
        decode_records(bytes(batch))
    assert parse_header(bytes(batch)).compression == Compression.ZSTD


def test_unknown_codec_is_refused() -> None:
    with pytest.raises(InvalidRecordBatch):
        decompress(5, b"x")
    with pytest.raises(InvalidRecordBatch):
        compress(5, b"x")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_highly_compressed_data_grows_its_buffer_until_it_fits(codec: Compression) -> None:
    data = bytes(5 * 1024 * 1024)  # zeros: thousands of times smaller compressed
    packed = compress(codec, data)
    assert len(packed) * 8 < len(data)
    assert decompress(codec, packed) == data


@pytest.mark.parametrize(
    ("codec", "framing"),
    [*((c, "kafka") for c in CODECS), (Compression.SNAPPY, "raw")],
    ids=lambda v: v.name.lower() if isinstance(v, Compression) else v,
)
def test_a_decompression_bomb_is_an_invalid_batch_not_an_exhausted_broker(
    codec: Compression, framing: str
) -> None:
    """A batch of a few KiB that would expand past MAX_DECOMPRESSED_BYTES is refused."""
    data = bytes(codecs.MAX_DECOMPRESSED_BYTES + 1)
    packed = bytes(cramjam.snappy.compress_raw(data)) if framing == "raw" else compress(codec, data)
    assert len(packed) < codecs.MAX_DECOMPRESSED_BYTES // 20
    with pytest.raises(InvalidRecordBatch, match="more than"):
        decompress(codec, packed)
    assert decompress(codec, compress(codec, data[1:])) == data[1:]  # at the bound: fine
