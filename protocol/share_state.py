"""Durable share-partition state as control records (seed 000, KIP-932 "Recovery and log cleaning").

Two control record types live in the share-partition's own log, each alone in a control batch:

- SHARE_CHECKPOINT (5): GroupId string, CheckpointEpoch uint16, StartOffset int64,
  EndOffset int64, States [BaseOffset int64, LastOffset int64, State int8, DeliveryCount int16]
- SHARE_DELTA (6): GroupId string, CheckpointEpoch uint16, BackOffset int64, States [...]

Not flexible: a string is an int16 length and UTF-8 bytes, an array an int32 count. The record
key is Kafka's control key (int16 version, int16 type); the value starts with an int16 schema
version, as Kafka's other stored records do.

Value version 1 (Shoal's retry backoff, issue 35) adds one field at the end of each state,
`NotBefore int64`: epoch milliseconds before which the records of an Available range may not be
acquired again (0: no wait). A record is written as version 1 only when one of its states
waits, so a share state with no backoff is written byte for byte as before; version 0 records
(every record written before) read as `not_before=0`, "no wait".
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c
from kio.records.readers import read_batch

from protocol.errors import ProtocolException
from protocol.record_batch import ATTRIBUTES_POS
from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import CONTROL_MASK
from protocol.record_batch import LOG_OVERHEAD
from protocol.record_batch import MAGIC
from protocol.record_batch import NO_PRODUCER_EPOCH
from protocol.record_batch import NO_PRODUCER_ID
from protocol.record_batch import NO_SEQUENCE
from protocol.record_batch import BatchHeader
from protocol.record_batch import control_record_key
from protocol.record_batch import encode_varint
from protocol.record_batch import parse_control_record_key
from protocol.record_batch import scan_batches

SHARE_CHECKPOINT = 5
SHARE_DELTA = 6
VALUE_VERSION = 0
VALUE_VERSION_NOT_BEFORE = 1  # each state ends with NotBefore int64
MAX_EPOCH = 65535  # CheckpointEpoch is a uint16; the epoch after 65535 is 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hh")  # value version, group id length
_NO_STATES = _I32.pack(0)
_CHECKPOINT_FIXED = struct.Struct(">Hqq")  # epoch, start offset, end offset
_DELTA_FIXED = struct.Struct(">Hq")  # epoch, back offset
_STATE = struct.Struct(">qqbh")  # base offset, last offset, state, delivery count
_STATE_V1 = struct.Struct(">qqbhq")  # ... and not before (epoch ms, 0: no wait)
# A control batch's header in two parts: up to the CRC, and what the CRC covers.
_HEADER_HEAD = struct.Struct(">qiibI")
_HEADER_TAIL = struct.Struct(">hiqqqhii")
assert _HEADER_HEAD.size == ATTRIBUTES_POS
assert _HEADER_HEAD.size + _HEADER_TAIL.size == BATCH_HEADER_SIZE
_BATCH_LENGTH_BASE = BATCH_HEADER_SIZE - LOG_OVERHEAD
_CHECKPOINT_KEY = control_record_key(SHARE_CHECKPOINT)
_DELTA_KEY = control_record_key(SHARE_DELTA)
_VARINT = [encode_varint(n) for n in range(64)]  # the one-byte varints of lengths 0..63


class InvalidShareState(ProtocolException, ValueError):
    """A SHARE_CHECKPOINT or SHARE_DELTA record does not parse."""


# NamedTuples, not frozen dataclasses: one of each is made per share-state write, and a frozen
# dataclass's __init__ (an object.__setattr__ per field) costs several times a tuple's.
class StateBatch(NamedTuple):
    base_offset: int
    last_offset: int
    state: int  # 0 Available, 2 Acknowledged, 3 Archiving (KIP-1191), 4 Archived
    delivery_count: int
    not_before: int = 0  # epoch ms before which an Available range is not acquired; 0: none


class ShareCheckpoint(NamedTuple):
    group_id: str
    checkpoint_epoch: int
    start_offset: int
    end_offset: int
    states: tuple[StateBatch, ...]


class ShareDelta(NamedTuple):
    group_id: str
    checkpoint_epoch: int
    back_offset: int
    states: tuple[StateBatch, ...]


ShareStateRecord = ShareCheckpoint | ShareDelta


def next_epoch(epoch: int) -> int:
    """The checkpoint epoch after `epoch` (wrapping past MAX_EPOCH to 1; 0 is never used)."""
    return epoch % MAX_EPOCH + 1


def _encode_states(states: tuple[StateBatch, ...], version: int) -> bytes:
    if version == VALUE_VERSION:
        packed = (
            _STATE.pack(s.base_offset, s.last_offset, s.state, s.delivery_count) for s in states
        )
    else:
        packed = (
            _STATE_V1.pack(s.base_offset, s.last_offset, s.state, s.delivery_count, s.not_before)
            for s in states
        )
    return _I32.pack(len(states)) + b"".join(packed)


def encode_value(record: ShareStateRecord) -> bytes:
    """Version 0, or 1 when a state waits (`not_before`): see the module docstring."""
    group = record.group_id.encode()
    states = record.states
    version = VALUE_VERSION
    for s in states:
        if s.not_before:
            version = VALUE_VERSION_NOT_BEFORE
            break
    if isinstance(record, ShareCheckpoint):
        fixed = _CHECKPOINT_FIXED.pack(
            record.checkpoint_epoch, record.start_offset, record.end_offset
        )
    else:
        fixed = _DELTA_FIXED.pack(record.checkpoint_epoch, record.back_offset)
    # An emptied window's checkpoint (each ACCEPT at a steady rate) has no state to pack.
    tail = _encode_states(states, version) if states else _NO_STATES
    return _VALUE_HEAD.pack(version, len(group)) + group + fixed + tail


def decode_value(record_type: int, value: bytes) -> ShareStateRecord:
    """:raises InvalidShareState:"""
    try:
        (version,) = _I16.unpack_from(value, 0)
        if version not in (VALUE_VERSION, VALUE_VERSION_NOT_BEFORE):
            raise InvalidShareState(f"share-state value version {version} is unknown")
        state = _STATE if version == VALUE_VERSION else _STATE_V1
        pos = 2
        (length,) = _I16.unpack_from(value, pos)
        group = value[pos + 2 : pos + 2 + length].decode()
        pos += 2 + length
        if record_type == SHARE_CHECKPOINT:
            epoch, start, end = _CHECKPOINT_FIXED.unpack_from(value, pos)
            pos += _CHECKPOINT_FIXED.size
        elif record_type == SHARE_DELTA:
            epoch, back = _DELTA_FIXED.unpack_from(value, pos)
            pos += _DELTA_FIXED.size
        else:
            raise InvalidShareState(f"control record type {record_type} is not share state")
        (count,) = _I32.unpack_from(value, pos)
        pos += 4
        if count < 0 or pos + count * state.size != len(value):
            raise InvalidShareState("trailing bytes after the states, or states missing")
        states = tuple(
            StateBatch(*state.unpack_from(value, pos + i * state.size)) for i in range(count)
        )
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidShareState(str(e)) from e
    if record_type == SHARE_CHECKPOINT:
        return ShareCheckpoint(group, epoch, start, end, states)
    return ShareDelta(group, epoch, back, states)


def encode_batch(record: ShareStateRecord, timestamp_ms: int) -> bytes:
    """A control batch holding one share-state record (its offset is assigned on append)."""
    return encode_control_batch(record, timestamp_ms)[0]


def encode_control_batch(record: ShareStateRecord, timestamp_ms: int) -> tuple[bytes, BatchHeader]:
    """The control batch of `encode_batch` and its header, for the log to append as built (no
    re-parse, no second CRC). Byte for byte `build_control_batch(0, -1, -1, timestamp_ms,
    [(control_record_key(type), encode_value(record))])`, held to it by
    tests/unit/test_share_state_encoder.py: one record at offset and timestamp delta 0, no
    headers, so only the value's length varint varies. With the trusted append: opcodes per
    steady-rate ShareFetch 10,613 -> 10,110 (the generic encoder and `validate_batches`)."""
    key = _CHECKPOINT_KEY if isinstance(record, ShareCheckpoint) else _DELTA_KEY
    value = encode_value(record)
    # attributes 0, timestamp delta 0, offset delta 0, key length 4 (zigzag 8), key
    n = len(value)
    body = (
        b"\x00\x00\x00\x08" + key + (_VARINT[n] if n < 64 else encode_varint(n)) + value + b"\x00"
    )
    n = len(body)
    records = (_VARINT[n] if n < 64 else encode_varint(n)) + body
    length = _BATCH_LENGTH_BASE + len(records)
    tail = _HEADER_TAIL.pack(
        CONTROL_MASK, 0, timestamp_ms, timestamp_ms, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
        NO_SEQUENCE, 1,
    )  # fmt: skip
    crc = crc32c.crc32c(tail + records)
    header = tuple.__new__(
        BatchHeader,
        (0, length, -1, MAGIC, crc, CONTROL_MASK, 0, timestamp_ms, timestamp_ms,
         NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, 1),
    )  # fmt: skip
    return _HEADER_HEAD.pack(0, length, -1, MAGIC, crc) + tail + records, header


def decode_batch(batch: bytes) -> list[ShareStateRecord]:
    """The share-state records of one control batch; other control records are skipped.

    Decoding records is fine here: control batches are few and small, and this runs only
    during recovery and in tools, never on the fetch or produce path.
    """
    scan = scan_batches(batch)
    if scan.stop_reason is not None or len(scan.batches) != 1:
        raise InvalidShareState(f"damaged control batch ({scan.stop_reason or 'length'})")
    try:
        parsed, _ = read_batch(batch, 0)
    except Exception as e:  # kio raises ValueError and friends for a bad batch
        raise InvalidShareState(f"control batch does not parse: {e}") from e
    out: list[ShareStateRecord] = []
    for rec in parsed.records:
        if rec.key is None or rec.value is None:
            continue
        _, record_type = parse_control_record_key(rec.key)
        if record_type in (SHARE_CHECKPOINT, SHARE_DELTA):
            out.append(decode_value(record_type, rec.value))
    return out
