"""The record codecs of a v2 batch, in Kafka's exact formats, all from cramjam.

Only the paths that read records use these (compacted topics' appends and the log cleaner);
produce and fetch of every other topic never decompress.

- gzip (1): a gzip stream; several members read as one, as Java's GZIPInputStream does.
- snappy (2): the Java client writes snappy-java's ("xerial") framing: an 8-byte magic, two
  int32 versions, then blocks of int32 length + raw snappy, and a concatenated stream may
  repeat the header. librdkafka writes raw snappy with no framing. Both are read, told apart by
  the magic as librdkafka and snappy-java do; the xerial framing is written, as Kafka does.
- lz4 (3): the LZ4 *frame* format. Written with independent 64 KiB blocks and no content
  checksum, as Kafka's KafkaLZ4BlockOutputStream (its reader cannot follow linked blocks).
- zstd (4): a standard zstd frame.

Decompression is bounded: a batch whose records section would grow past
`MAX_DECOMPRESSED_BYTES` is refused as invalid, so a small batch built to expand without end
(a "decompression bomb") cannot exhaust the broker's memory. Kafka's batches are at most
``message.max.bytes`` (1 MiB by default) compressed; 64 MiB leaves real data ample room.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import cramjam

from protocol.record_batch import Buffer
from protocol.record_batch import Compression
from protocol.record_batch import InvalidRecordBatch

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_VERSIONS = struct.Struct(">ii")
XERIAL_HEADER = XERIAL_MAGIC + _XERIAL_VERSIONS.pack(1, 1)  # version 1, compatible with 1
XERIAL_BLOCK_BYTES = 32 * 1024  # snappy-java's default block size, which Kafka keeps
_INT32 = struct.Struct(">i")
GZIP_LEVEL = 6  # zlib's default, as Java's GZIPOutputStream
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_FIRST_GUESS = 8  # times the compressed size: the output buffer tried first
_OVERFLOW = "failed to write whole buffer"  # cramjam's words for an output buffer too small


class TooLarge(InvalidRecordBatch):
    def __init__(self) -> None:
        super().__init__("compression", f"decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes")


def _bounded(decompress_into: Callable[[Buffer, bytearray], int], data: Buffer) -> bytearray:
    """Decompress into a buffer that grows (4x a time) up to `MAX_DECOMPRESSED_BYTES`."""
    size = min(max(_FIRST_GUESS * len(data), 64 * 1024), MAX_DECOMPRESSED_BYTES)
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError as e:
            if _OVERFLOW not in str(e):
                raise
            if size >= MAX_DECOMPRESSED_BYTES:
                raise TooLarge() from None
            size = min(size * 4, MAX_DECOMPRESSED_BYTES)
            continue
        del out[written:]
        return out


def _xerial_blocks(data: Buffer) -> list[memoryview]:
    """The raw snappy blocks of an xerial-framed stream (headers may repeat)."""
    view = memoryview(data)
    blocks: list[memoryview] = []
    pos = len(XERIAL_HEADER)
    while pos < len(view):
        if view[pos : pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            pos += len(XERIAL_HEADER)  # a concatenated stream starts again
            continue
        if pos + _INT32.size > len(view):
            raise InvalidRecordBatch("compression", "snappy: block length cut short")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise InvalidRecordBatch("compression", f"snappy: block of {length} bytes")
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


def _snappy_decompress(data: Buffer) -> bytes:
    xerial = bytes(data[: len(XERIAL_MAGIC)]) == XERIAL_MAGIC and len(data) >= len(XERIAL_HEADER)
    blocks = _xerial_blocks(data) if xerial else [memoryview(data)]
    # A raw block starts with its decompressed length: the bound is checked before any work.
    if sum(cramjam.snappy.decompress_raw_len(b) for b in blocks) > MAX_DECOMPRESSED_BYTES:
        raise TooLarge()
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(data), XERIAL_BLOCK_BYTES):
        block = cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK_BYTES])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _lz4_compress(data: bytes) -> bytes:
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


def _zstd_compress(data: bytes) -> bytes:
    compressor = cramjam.zstd.Compressor()
    compressor.compress(data)
    return bytes(compressor.finish())


_DECOMPRESS: dict[int, Callable[[Buffer], Buffer]] = {
    Compression.GZIP: lambda data: _bounded(cramjam.gzip.decompress_into, data),
    Compression.SNAPPY: _snappy_decompress,
    Compression.LZ4: lambda data: _bounded(cramjam.lz4.decompress_into, data),
    Compression.ZSTD: lambda data: _bounded(cramjam.zstd.decompress_into, data),
}
_COMPRESS: dict[int, Callable[[bytes], bytes]] = {
    Compression.GZIP: lambda data: bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL)),
    Compression.SNAPPY: _snappy_compress,
    Compression.LZ4: _lz4_compress,
    Compression.ZSTD: _zstd_compress,
}


def decompress(codec: int, data: Buffer) -> Buffer:
    """The records section of a batch compressed with `codec` (1-4), decompressed.

    :raises InvalidRecordBatch: an unknown codec, data that does not decompress, or data that
        would decompress to more than `MAX_DECOMPRESSED_BYTES`.
    """
    if codec not in _DECOMPRESS:
        raise InvalidRecordBatch("compression", f"codec {codec}")
    try:
        return _DECOMPRESS[codec](data)
    except cramjam.DecompressionError as e:
        raise InvalidRecordBatch("compression", f"{Compression(codec).name.lower()}: {e}") from e


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed with `codec` (1-4) in the format Kafka's own clients write.

    :raises InvalidRecordBatch: an unknown codec.
    """
    if codec not in _COMPRESS:
        raise InvalidRecordBatch("compression", f"codec {codec}")
    return _COMPRESS[codec](data)
