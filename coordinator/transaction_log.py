"""The transaction coordinator's durable state: `__transaction_state`, a compacted internal log
of one record per transactional id (`protocol.transaction_log`), replayed at start as
`__consumer_offsets` is (`coordinator.offset_store`). Appended before a state takes effect, and
flushed as the log's `flush.messages` says, as a produced record is.

A transaction's partitions and offsets are written as additions, one per request, to slots the
id reuses (`protocol.transaction_log`); the highest slot each id ever wrote is remembered so
that forgetting the id tombstones every slot it holds in the compacted log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import structlog

from coordinator.txn_metadata import ENDED
from coordinator.txn_metadata import state_of
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.records import decode_records
from protocol.records import record_value
from protocol.transaction_log import WHOLE
from protocol.transaction_log import Addition
from protocol.transaction_log import InvalidTransactionRecord
from protocol.transaction_log import TransactionRecord
from protocol.transaction_log import decode_addition
from protocol.transaction_log import decode_key
from protocol.transaction_log import decode_value
from protocol.transaction_log import encode_addition
from protocol.transaction_log import encode_addition_key
from protocol.transaction_log import encode_key
from protocol.transaction_log import encode_value
from storage.log import PartitionLog
from storage.log_manager import LogManager
from storage.topics import TRANSACTION_STATE

_log = structlog.get_logger("shoal.transactions")

# Kafka's transaction state topic: compacted, 100 MiB segments
# (transaction.state.log.segment.bytes).
TRANSACTION_LOG_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)}
RECOVERY_READ_BYTES = 1024 * 1024
# Tombstones per batch when an id is forgotten (~5 us each to build, on the loop).
TOMBSTONES_PER_WRITE = 2_000
_Records = list[tuple[bytes, bytes | None]]


class TransactionLog:
    def __init__(self, log: PartitionLog, now_ms: Callable[[], int]) -> None:
        self._log = log
        self._now_ms = now_ms
        self._recovered: dict[str, TransactionRecord] | None = None
        # id -> 1 + the highest slot it wrote (its slots' tombstones when it is forgotten)
        self._slots: dict[str, int] = {}

    @classmethod
    def open(cls, logs: LogManager, now_ms: Callable[[], int]) -> TransactionLog:
        return cls(logs.internal_log(TRANSACTION_STATE, TRANSACTION_LOG_CONFIGS), now_ms)

    def append(self, record: TransactionRecord) -> None:
        """:raises storage.errors.StorageError: not written."""
        self._put([(encode_key(record.transactional_id), encode_value(record))])

    def append_addition(
        self, txn_id: str, slot: int, addition: Addition, state: TransactionRecord | None = None
    ) -> None:
        """One addition to the id's transaction, after its new `state` (a transaction that
        starts) in the same batch: both or neither. :raises storage.errors.StorageError:"""
        records: _Records = []
        if state is not None:
            records.append((encode_key(txn_id), encode_value(state)))
        records.append((encode_addition_key(txn_id, slot), encode_addition(addition)))
        self._put(records)
        self._slots[txn_id] = max(self._slots.get(txn_id, 0), slot + 1)

    def delete(self, transactional_id: str) -> bool:
        """Tombstones: the id is forgotten, its slots first, at most TOMBSTONES_PER_WRITE a
        call; True once its own record's tombstone is written (call again until then).

        :raises storage.errors.StorageError: not written (nothing more is forgotten)."""
        held = self._slots.get(transactional_id, 0)
        low = max(0, held - TOMBSTONES_PER_WRITE)
        records: _Records = [
            (encode_addition_key(transactional_id, slot), None) for slot in range(low, held)
        ]
        done = low == 0 and len(records) < TOMBSTONES_PER_WRITE
        if done:
            records.append((encode_key(transactional_id), None))
        self._put(records)
        if done:
            self._slots.pop(transactional_id, None)
        else:
            self._slots[transactional_id] = low
        return done

    def _put(self, records: _Records) -> None:
        now = self._now_ms()
        self._log.append(build_batch(records, timestamp_ms=now), now_ms=now)

    def max_producer_id(self) -> int:
        """The highest producer id a transactional id holds (-1: none): ids handed out to
        transactional producers that never wrote are in no partition, only here, and the
        producer id allocator must start above them too."""
        ids = [i for m in self.recover().values() for i in (m.producer_id, m.last_producer_id)]
        return max(ids, default=-1)

    def recover(self) -> dict[str, TransactionRecord]:
        """The latest state of every transactional id, read from the log once (at start),
        with the additions of its current transaction in place."""
        if self._recovered is None:
            self._recovered = self._replay_all()
        return dict(self._recovered)

    def _replay_all(self) -> dict[str, TransactionRecord]:
        txns: dict[str, TransactionRecord] = {}
        additions: dict[tuple[str, int], Addition] = {}
        offset, end = self._log.log_start_offset, self._log.log_end_offset
        while offset < end:
            data = self._log.read(offset, RECOVERY_READ_BYTES)
            if not data:
                break
            for pos, header in iter_batch_headers(data):
                offset = header.last_offset + 1
                if header.is_control or header.record_count == 0:
                    continue
                self._replay(txns, additions, data[pos : pos + header.size], header.base_offset)
        self._merge(txns, additions)
        if txns:
            _log.info("transaction state recovered", transactional_ids=len(txns), log_end=end)
        return txns

    def _merge(
        self, txns: dict[str, TransactionRecord], additions: dict[tuple[str, int], Addition]
    ) -> None:
        """Each id's latest additions of its current transaction go into its state; the
        others are stale (an earlier transaction's, in slots not written since)."""
        for (txn_id, slot), addition in additions.items():
            self._slots[txn_id] = max(self._slots.get(txn_id, 0), slot + 1)
            m = txns.get(txn_id)
            if m is None or m.txn == WHOLE or addition.txn != m.txn or state_of(m) in ENDED:
                continue
            m.partitions.update(addition.partitions)
            if addition.offsets:
                m.offsets.setdefault(addition.group, {}).update(addition.offsets)
            txns[txn_id] = replace(m, additions=max(m.additions, slot + 1))

    @staticmethod
    def _replay(
        txns: dict[str, TransactionRecord],
        additions: dict[tuple[str, int], Addition],
        batch: bytes,
        base_offset: int,
    ) -> None:
        try:
            _, records = decode_records(batch)
            for record in records:
                if record.key is None:
                    continue
                txn_id, slot = decode_key(record.key)
                value = record_value(record)
                if slot is not None:
                    if value is None:
                        additions.pop((txn_id, slot), None)
                    else:
                        additions[(txn_id, slot)] = decode_addition(value)
                elif value is None:
                    txns.pop(txn_id, None)
                else:
                    txns[txn_id] = decode_value(txn_id, value)
        except (InvalidRecordBatch, InvalidTransactionRecord) as e:
            _log.error("unreadable transaction state batch stepped over",
                       base_offset=base_offset, error=str(e))  # fmt: skip
