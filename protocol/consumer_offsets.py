"""Committed offsets as records of the internal `__consumer_offsets` log, in Kafka's own schemas.

Kafka's tools read these records, so Shoal writes them as Kafka does (not flexible; a string is
an int16 length and UTF-8 bytes):

- key, OffsetCommitKey version 1: group string, topic string, partition int32
- value, OffsetCommitValue version 3: offset int64, leader epoch int32, metadata string,
  commit timestamp int64
- a null value (tombstone) deletes the key's committed offset.

Each part starts with its int16 schema version. Values of versions 0-2 (Kafka's older ones,
which carried an expire timestamp) are read too; a key of another version (Kafka's group
metadata, version 2) is not an offset and is skipped by the reader.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.errors import ProtocolException
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import encode_varint
from protocol.record_batch import seal_batch

KEY_VERSION = 1
VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">i")
_V0_FIXED = struct.Struct(">q")  # offset
_V3_FIXED = struct.Struct(">qi")  # offset, leader epoch
_I64 = struct.Struct(">q")


class InvalidOffsetRecord(ProtocolException, ValueError):
    """Bytes that are not an offset commit key or value."""


@dataclass(frozen=True, slots=True, order=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = _I16.unpack_from(buf, pos)
    pos += _I16.size
    if length < 0 or pos + length > len(buf):
        raise InvalidOffsetRecord(f"string of {length} bytes at {pos}")
    return buf[pos : pos + length].decode(), pos + length


def encode_key(key: OffsetKey) -> bytes:
    return (
        _I16.pack(KEY_VERSION)
        + _string(key.group)
        + _string(key.topic)
        + _KEY_TAIL.pack(key.partition)
    )


def encode_value(value: OffsetValue) -> bytes:
    return (
        _I16.pack(VALUE_VERSION)
        + _V3_FIXED.pack(value.offset, value.leader_epoch)
        + _string(value.metadata)
        + _I64.pack(value.commit_timestamp_ms)
    )


def decode_key(buf: bytes) -> OffsetKey | None:
    """The offset key, or None for a key of another kind (Kafka's group metadata).

    :raises InvalidOffsetRecord: bytes that do not parse.
    """
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version not in (0, 1):
            return None
        group, pos = _read_string(buf, _I16.size)
        topic, pos = _read_string(buf, pos)
        (partition,) = _KEY_TAIL.unpack_from(buf, pos)
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidOffsetRecord(f"offset key: {e}") from e
    return OffsetKey(group, topic, partition)


def decode_value(buf: bytes) -> OffsetValue:
    """:raises InvalidOffsetRecord: bytes that do not parse, or an unknown version."""
    try:
        (version,) = _I16.unpack_from(buf, 0)
        pos = _I16.size
        if version == 3:
            offset, epoch = _V3_FIXED.unpack_from(buf, pos)
            pos += _V3_FIXED.size
        elif version in (0, 1, 2):
            (offset,), epoch = _V0_FIXED.unpack_from(buf, pos), -1
            pos += _V0_FIXED.size
        else:
            raise InvalidOffsetRecord(f"offset value version {version}")
        metadata, pos = _read_string(buf, pos)
        (timestamp,) = _I64.unpack_from(buf, pos)
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidOffsetRecord(f"offset value: {e}") from e
    return OffsetValue(offset, epoch, metadata, timestamp)


class OffsetRecords:
    """One group's commit as the records of one batch (what `build_batch` makes of
    `(encode_key(k), encode_value(v))` pairs): encoded a record at a time by `add`, so a caller
    committing 100,000 partitions may yield between them, and sealed at once by `batch`. The
    key's group part is encoded once, each topic's once."""

    __slots__ = ("_body", "_group", "_topics", "count")

    def __init__(self, group: str) -> None:
        self._group = _I16.pack(KEY_VERSION) + _string(group)
        self._topics: dict[str, bytes] = {}
        self._body = bytearray()
        self.count = 0

    def add(self, topic: str, partition: int, value: OffsetValue | None) -> None:
        prefix = self._topics.get(topic)
        if prefix is None:
            prefix = self._topics[topic] = self._group + _string(topic)
        key = prefix + _KEY_TAIL.pack(partition)
        record = bytearray(_NO_ATTRIBUTES_NO_TIME_DELTA)
        record += encode_varint(self.count)  # offset delta
        record += encode_varint(len(key))
        record += key
        if value is None:
            record += _NULL
        else:
            data = encode_value(value)
            record += encode_varint(len(data))
            record += data
        record += _NO_HEADERS
        body = self._body
        body += encode_varint(len(record))
        body += record
        self.count += 1

    def batch(self, timestamp_ms: int, transaction: tuple[int, int, int] | None = None) -> bytes:
        """The records added, as one uncompressed batch (at least one record); with
        `transaction` (producer id, epoch, base sequence), a transactional batch of that
        producer (a TxnOffsetCommit, committed by its transaction's marker)."""
        if not self.count:
            raise ValueError("a batch needs at least one record")
        if transaction is None:
            return seal_batch(bytes(self._body), self.count, timestamp_ms=timestamp_ms)
        pid, epoch, sequence = transaction
        return seal_batch(
            bytes(self._body), self.count, timestamp_ms=timestamp_ms, producer_id=pid,
            producer_epoch=epoch, base_sequence=sequence, attributes=TRANSACTIONAL_MASK,
        )  # fmt: skip


_NO_ATTRIBUTES_NO_TIME_DELTA = b"\x00" + encode_varint(0)
_NULL = encode_varint(-1)
_NO_HEADERS = encode_varint(0)
