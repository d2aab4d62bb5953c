"""Records of the internal `__transaction_state` log: one per transactional id, compacted.

The key is Kafka's TransactionLogKey version 0 (int16 version, then the transactional id as an
int16-length string), so the cleaner keeps the latest state of each id and a null value (a
tombstone) forgets an expired one. The value is Shoal's own (Kafka's TransactionLogValue has no
room for the offsets a transaction commits, which Shoal keeps here until the commit): an int16
version (0), then a UTF-8 JSON object with Kafka's fields (producer id and epoch, the previous
ones, timeout, state, partitions, start and last-update times) plus the groups whose offsets
the transaction commits, and those offsets.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from dataclasses import field

from protocol.errors import ProtocolException

KEY_VERSION = 0
VALUE_VERSION = 0
_I16 = struct.Struct(">h")

TopicPartition = tuple[str, int]


class InvalidTransactionRecord(ProtocolException, ValueError):
    """Bytes that are not a transaction log key or value."""


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """An offset a transaction commits for a group (visible once the transaction commits)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str  # coordinator.txn_metadata.TxnState's name
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    update_ms: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # group -> (topic, partition) -> offset; written by TxnOffsetCommit, committed at COMMIT
    offsets: dict[str, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)


def encode_key(transactional_id: str) -> bytes:
    data = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(data)) + data


def decode_key(buf: bytes) -> str:
    """:raises InvalidTransactionRecord: bytes that do not parse."""
    try:
        version, length = struct.unpack_from(">hh", buf, 0)
        if version != KEY_VERSION or length < 0 or 4 + length != len(buf):
            raise InvalidTransactionRecord(f"transaction key version {version}, length {length}")
        return buf[4:].decode()
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidTransactionRecord(f"transaction key: {e}") from e


def encode_value(record: TransactionRecord) -> bytes:
    doc = {
        "producer_id": record.producer_id,
        "producer_epoch": record.producer_epoch,
        "last_producer_id": record.last_producer_id,
        "last_producer_epoch": record.last_producer_epoch,
        "timeout_ms": record.timeout_ms,
        "state": record.state,
        "partitions": sorted([t, p] for t, p in record.partitions),
        "start_ms": record.start_ms,
        "update_ms": record.update_ms,
        "offsets": {
            group: [
                [t, p, o.offset, o.leader_epoch, o.metadata] for (t, p), o in sorted(tps.items())
            ]
            for group, tps in record.offsets.items()
        },
    }
    return _I16.pack(VALUE_VERSION) + json.dumps(doc, separators=(",", ":")).encode()


def decode_value(transactional_id: str, buf: bytes) -> TransactionRecord:
    """:raises InvalidTransactionRecord: bytes that do not parse, or an unknown version."""
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != VALUE_VERSION:
            raise InvalidTransactionRecord(f"transaction value version {version}")
        doc = json.loads(buf[_I16.size :])
        return TransactionRecord(
            transactional_id=transactional_id,
            producer_id=int(doc["producer_id"]),
            producer_epoch=int(doc["producer_epoch"]),
            last_producer_id=int(doc["last_producer_id"]),
            last_producer_epoch=int(doc["last_producer_epoch"]),
            timeout_ms=int(doc["timeout_ms"]),
            state=str(doc["state"]),
            partitions=frozenset((str(t), int(p)) for t, p in doc["partitions"]),
            start_ms=int(doc["start_ms"]),
            update_ms=int(doc["update_ms"]),
            offsets={
                str(group): {
                    (str(t), int(p)): PendingOffset(int(o), int(e), str(m)) for t, p, o, e, m in tps
                }
                for group, tps in doc["offsets"].items()
            },
        )
    except (struct.error, ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, InvalidTransactionRecord):
            raise
        raise InvalidTransactionRecord(f"transaction value: {e}") from e
