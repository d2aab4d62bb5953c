"""Transaction markers: the COMMIT/ABORT control batches that end a transaction in a partition.

As Kafka writes them (`MemoryRecords.withEndTransactionMarker`, `EndTransactionMarker`): a
control batch (attributes: control and transactional bits) of one record, carrying the
producer's id and epoch in its header and base sequence -1. The record's key is the control
key (int16 version 0, int16 type: ABORT 0, COMMIT 1); its value is EndTransactionMarker
version 0: int16 version, int32 coordinator epoch.

Share-state control batches (`protocol.share_state`) carry producer id -1; a marker always
carries the producer id of its transaction, which is how the two kinds are told apart from
the header alone.
"""

from __future__ import annotations

import struct

from protocol.record_batch import BATCH_HEADER_SIZE
from protocol.record_batch import CONTROL_MASK
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import Buffer
from protocol.record_batch import ControlRecordType
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import control_record_key
from protocol.record_batch import parse_control_record_key
from protocol.record_batch import parse_header
from protocol.record_batch import read_varint

MARKER_VALUE_VERSION = 0
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def build_marker(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """One control batch ending `producer_id`'s transaction (its offset is set on append)."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_batch(
        [(control_record_key(kind), _MARKER_VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch))],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=CONTROL_MASK | TRANSACTIONAL_MASK,
    )


def marker_type(batch: Buffer) -> int:
    """The control type (ABORT 0, COMMIT 1) of the uncompressed control batch at the start of
    `batch`: its first record's key, read without decoding anything else.

    :raises InvalidRecordBatch: not a control batch, or a first record that does not parse.
    """
    header = parse_header(batch)
    if not header.is_control or header.record_count < 1:
        raise InvalidRecordBatch("control", "not a control batch with a record")
    try:
        _, pos = read_varint(batch, BATCH_HEADER_SIZE)  # record length
        pos += 1  # attributes
        _, pos = read_varint(batch, pos)  # timestamp delta
        _, pos = read_varint(batch, pos)  # offset delta
        key_length, pos = read_varint(batch, pos)
    except IndexError as e:
        raise InvalidRecordBatch("truncated", "control record runs past the batch") from e
    if key_length < 4 or pos + key_length > len(batch):
        raise InvalidRecordBatch("control", f"control record key of {key_length} bytes")
    return parse_control_record_key(bytes(batch[pos : pos + key_length]))[1]
