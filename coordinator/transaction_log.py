"""The transaction coordinator's durable state: `__transaction_state`, a compacted internal log
of one record per transactional id (`protocol.transaction_log`), replayed at start as
`__consumer_offsets` is (`coordinator.offset_store`). Appended before a state takes effect, and
flushed as the log's `flush.messages` says, as a produced record is.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import build_batch
from protocol.record_batch import iter_batch_headers
from protocol.records import decode_records
from protocol.records import record_value
from protocol.transaction_log import InvalidTransactionRecord
from protocol.transaction_log import TransactionRecord
from protocol.transaction_log import decode_key
from protocol.transaction_log import decode_value
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


class TransactionLog:
    def __init__(self, log: PartitionLog, now_ms: Callable[[], int]) -> None:
        self._log = log
        self._now_ms = now_ms
        self._recovered: dict[str, TransactionRecord] | None = None

    @classmethod
    def open(cls, logs: LogManager, now_ms: Callable[[], int]) -> TransactionLog:
        return cls(logs.internal_log(TRANSACTION_STATE, TRANSACTION_LOG_CONFIGS), now_ms)

    def append(self, record: TransactionRecord) -> None:
        """:raises storage.errors.StorageError: not written."""
        self._put(record.transactional_id, encode_value(record))

    def delete(self, transactional_id: str) -> None:
        """A tombstone: the id is forgotten. :raises storage.errors.StorageError:"""
        self._put(transactional_id, None)

    def _put(self, transactional_id: str, value: bytes | None) -> None:
        now = self._now_ms()
        batch = build_batch([(encode_key(transactional_id), value)], timestamp_ms=now)
        self._log.append(batch, now_ms=now)

    def max_producer_id(self) -> int:
        """The highest producer id a transactional id holds (-1: none): ids handed out to
        transactional producers that never wrote are in no partition, only here, and the
        producer id allocator must start above them too."""
        ids = [i for m in self.recover().values() for i in (m.producer_id, m.last_producer_id)]
        return max(ids, default=-1)

    def recover(self) -> dict[str, TransactionRecord]:
        """The latest state of every transactional id, read from the log once (at start)."""
        if self._recovered is None:
            self._recovered = self._replay_all()
        return dict(self._recovered)

    def _replay_all(self) -> dict[str, TransactionRecord]:
        txns: dict[str, TransactionRecord] = {}
        offset, end = self._log.log_start_offset, self._log.log_end_offset
        while offset < end:
            data = self._log.read(offset, RECOVERY_READ_BYTES)
            if not data:
                break
            for pos, header in iter_batch_headers(data):
                offset = header.last_offset + 1
                if header.is_control or header.record_count == 0:
                    continue
                self._replay(txns, data[pos : pos + header.size], header.base_offset)
        if txns:
            _log.info("transaction state recovered", transactional_ids=len(txns), log_end=end)
        return txns

    @staticmethod
    def _replay(txns: dict[str, TransactionRecord], batch: bytes, base_offset: int) -> None:
        try:
            _, records = decode_records(batch)
            for record in records:
                if record.key is None:
                    continue
                txn_id = decode_key(record.key)
                value = record_value(record)
                if value is None:
                    txns.pop(txn_id, None)
                else:
                    txns[txn_id] = decode_value(txn_id, value)
        except (InvalidRecordBatch, InvalidTransactionRecord) as e:
            _log.error("unreadable transaction state batch stepped over",
                       base_offset=base_offset, error=str(e))  # fmt: skip
