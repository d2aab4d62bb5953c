"""Records of the internal `__transaction_state` log: one per transactional id, compacted.

The key is Kafka's TransactionLogKey version 0 (int16 version, then the transactional id as an
int16-length string), so the cleaner keeps the latest state of each id and a null value (a
tombstone) forgets an expired one. The value is Shoal's own (Kafka's TransactionLogValue has no
room for the offsets a transaction commits, which Shoal keeps here until the commit): an int16
version (0), then a UTF-8 JSON object with Kafka's fields (producer id and epoch, the previous
ones, timeout, state, start and last-update times) and the transaction's number `txn`.

A transaction's partitions and pending offsets are not in that record: Kafka rewrites its whole
TransactionLogValue (every partition) at each AddPartitionsToTxn, so the cost of a request grows
with the transaction. Here each request that adds to a transaction writes an *addition*: Shoal's
own key version 1 (the id, then an int32 slot: 0, 1, 2... within the transaction) whose value
(int16 version 0, then JSON) holds the transaction's number and only what that request added.
Slots are reused by the id's next transaction, so compaction keeps the latest of each; an
addition whose number is not the current transaction's is stale and ignored. Records written
before additions existed (number 0, `txn` absent) hold the partitions and offsets inline; a
transaction of number 0 is still written whole, so such a log reads as it was written.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Collection
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field

from protocol.errors import ProtocolException

KEY_VERSION = 0
ADDITION_KEY_VERSION = 1
VALUE_VERSION = 0
ADDITION_VALUE_VERSION = 0
# Transaction number 0: written whole (inline partitions and offsets), as before additions.
WHOLE = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

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
    # Grown in place by the coordinator once an addition is written (a copy per request would
    # cost what the whole transaction holds); every other move makes new containers.
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # group -> (topic, partition) -> offset; written by TxnOffsetCommit, committed at COMMIT
    offsets: dict[str, dict[TopicPartition, PendingOffset]] = field(default_factory=dict)
    txn: int = WHOLE  # the id's transaction number, + 1 at each new transaction
    additions: int = 0  # addition records (slots) written for this transaction


@dataclass(frozen=True, slots=True)
class Addition:
    """What one request adds to transaction number `txn`: partitions, or a group's offsets."""

    txn: int
    partitions: Collection[TopicPartition] = ()
    group: str = ""
    offsets: Mapping[TopicPartition, PendingOffset] = field(default_factory=dict)


def encode_key(transactional_id: str) -> bytes:
    data = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(data)) + data


def encode_addition_key(transactional_id: str, slot: int) -> bytes:
    data = transactional_id.encode()
    return _I16.pack(ADDITION_KEY_VERSION) + _I16.pack(len(data)) + data + _I32.pack(slot)


def decode_key(buf: bytes) -> tuple[str, int | None]:
    """The transactional id, and the slot of an addition (None: the id's state record).

    :raises InvalidTransactionRecord: bytes that do not parse."""
    try:
        version, length = struct.unpack_from(">hh", buf, 0)
        tail = {KEY_VERSION: 0, ADDITION_KEY_VERSION: _I32.size}.get(version)
        if tail is None or length < 0 or 4 + length + tail != len(buf):
            raise InvalidTransactionRecord(f"transaction key version {version}, length {length}")
        txn_id = buf[4 : 4 + length].decode()
        if version == KEY_VERSION:
            return txn_id, None
        return txn_id, _I32.unpack_from(buf, 4 + length)[0]
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidTransactionRecord(f"transaction key: {e}") from e


def encode_addition(addition: Addition) -> bytes:
    """Partitions grouped by topic (a list of ints each), offsets as rows: what one request
    added, so its cost follows the request, not the transaction."""
    by_topic: dict[str, list[int]] = {}
    for t, p in addition.partitions:
        by_topic.setdefault(t, []).append(p)
    doc = {
        "txn": addition.txn,
        "partitions": by_topic,
        "group": addition.group,
        "offsets": [
            [t, p, o.offset, o.leader_epoch, o.metadata] for (t, p), o in addition.offsets.items()
        ],
    }
    return _I16.pack(ADDITION_VALUE_VERSION) + json.dumps(doc, separators=(",", ":")).encode()


def decode_addition(buf: bytes) -> Addition:
    """:raises InvalidTransactionRecord: bytes that do not parse, or an unknown version."""
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != ADDITION_VALUE_VERSION:
            raise InvalidTransactionRecord(f"transaction addition version {version}")
        doc = json.loads(buf[_I16.size :])
        return Addition(
            txn=int(doc["txn"]),
            partitions=[(str(t), int(p)) for t, ps in doc["partitions"].items() for p in ps],
            group=str(doc["group"]),
            offsets={
                (str(t), int(p)): PendingOffset(int(o), int(e), str(m))
                for t, p, o, e, m in doc["offsets"]
            },
        )
    except (struct.error, ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, InvalidTransactionRecord):
            raise
        raise InvalidTransactionRecord(f"transaction addition: {e}") from e


def encode_value(record: TransactionRecord) -> bytes:
    """The id's state; its partitions and offsets only for a transaction written whole."""
    doc: dict[str, object] = {
        "producer_id": record.producer_id,
        "producer_epoch": record.producer_epoch,
        "last_producer_id": record.last_producer_id,
        "last_producer_epoch": record.last_producer_epoch,
        "timeout_ms": record.timeout_ms,
        "state": record.state,
        "start_ms": record.start_ms,
        "update_ms": record.update_ms,
        "txn": record.txn,
    }
    if record.txn == WHOLE:
        doc["partitions"] = sorted([t, p] for t, p in record.partitions)
        doc["offsets"] = {
            group: [
                [t, p, o.offset, o.leader_epoch, o.metadata] for (t, p), o in sorted(tps.items())
            ]
            for group, tps in record.offsets.items()
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
            partitions={(str(t), int(p)) for t, p in doc.get("partitions", ())},
            start_ms=int(doc["start_ms"]),
            update_ms=int(doc["update_ms"]),
            offsets={
                str(group): {
                    (str(t), int(p)): PendingOffset(int(o), int(e), str(m)) for t, p, o, e, m in tps
                }
                for group, tps in doc.get("offsets", {}).items()
            },
            txn=int(doc.get("txn", WHOLE)),
        )
    except (struct.error, ValueError, KeyError, TypeError, AttributeError) as e:
        if isinstance(e, InvalidTransactionRecord):
            raise
        raise InvalidTransactionRecord(f"transaction value: {e}") from e
