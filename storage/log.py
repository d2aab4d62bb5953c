"""The partition log contract shared by the disk and in-memory implementations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple
from typing import Protocol

from protocol.record_batch import BatchHeader
from protocol.record_batch import Buffer
from storage.producer_state import AbortedTxn
from storage.segment import PendingSync


class AppendResult(NamedTuple):
    """Where an append put its records. A tuple: one is made per produce request, and a
    frozen dataclass costs several times as much to build."""

    base_offset: int
    last_offset: int
    log_start_offset: int
    log_append_time_ms: int = -1  # -1: CreateTime topics keep the producer's timestamps
    duplicate: bool = False  # a retried idempotent batch: offsets are the original ones


class BatchSpan(NamedTuple):
    """Where one stored batch sits in a read result, from its header alone."""

    base_offset: int
    last_offset: int
    position_in_result: int
    size: int
    is_control: bool
    has_records: bool = True  # False: an empty batch, whose offsets the cleaner removed
    producer_id: int = -1  # a transactional batch's producer (read_committed); -1: not one


class PartitionLog(Protocol):
    """One partition's log. Synchronous: the broker calls it from its event loop."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign (= high watermark on a single broker)."""
        ...

    def append(
        self, records: Buffer, *, now_ms: int, defer_sync: bool = False, keyed: bool = False
    ) -> AppendResult:
        """Append a Produce ``records`` blob (one or more batches), offsets assigned here.

        ``keyed``: the broker built every record with a key itself (its internal logs), so a
        compacted log skips reading each record for one (100,000 took 0.2-1.2 s).

        When ``log.flush.interval.messages`` is reached the log is fsynced before this returns,
        unless ``defer_sync``: then ``sync_due`` says so, and the caller has the fsync run
        (off the event loop, one for every append of a loop tick) before it answers.

        :raises protocol.record_batch.InvalidRecordBatch: corrupt or control input.
        :raises storage.errors.OutOfOrderSequence:
        :raises storage.errors.InvalidProducerEpoch:
        """
        ...

    def append_control(
        self, batch: Buffer, *, now_ms: int, header: BatchHeader | None = None
    ) -> AppendResult:
        """Append a control batch built by the broker itself; with its `header` (as built, one
        batch), the batch is trusted as it is and not validated again."""
        ...

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        now_ms: int,
        coordinator_epoch: int = 0,
    ) -> AppendResult:
        """Append a transaction's COMMIT/ABORT marker and end the transaction here.

        :raises storage.errors.KafkaStorageError: not written; nothing changed.
        """
        ...

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the log end (Kafka's LSO)."""
        ...

    def active_producers(self) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, open transaction's first offset
        or -1) of each producer this partition knows (DescribeProducers)."""
        ...

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions ending at or after `start` and beginning before `upper`."""
        ...

    def read(self, offset: int, max_bytes: int, first_batch_max: int | None = None) -> bytes:
        """Whole stored batches from the one holding ``offset``, up to ``max_bytes``; the
        first one whole even above it (KIP-74) up to ``first_batch_max`` (None: whatever its
        size; above it, the read is empty).

        Damaged bytes are never returned: damaged offsets read as an empty batch over them
        (`storage.damage.stand_in`), which every reader steps over as over compaction's. A
        read that finds only empty batches goes on past them to the next records.

        :raises storage.errors.OffsetOutOfRange: outside [log start, log end].
        """
        ...

    def read_with_spans(
        self,
        offset: int,
        max_bytes: int,
        max_records: int | None = None,
        first_batch_max: int | None = None,
    ) -> tuple[bytes, list[BatchSpan]]:
        """``read`` plus every batch boundary in the result (ShareFetch reads once)."""
        ...

    def batch_spans(
        self, offset: int, max_bytes: int, max_records: int | None = None
    ) -> list[BatchSpan]: ...

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(base offset, maxTimestamp) of the first batch with maxTimestamp >= ts."""
        ...

    def learn_data_max(self) -> Iterator[None]:
        """Work `offset_for_max_timestamp` may need (a header walk of a segment saved before
        its data maximum was), in slices: drive it between awaits on the event loop."""
        ...

    def offset_for_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first data record with the largest timestamp.

        :raises storage.errors.CorruptRecords: the batch holding it was damaged: drive
            `learn_data_max` again (it now steps over the damage), then ask again.
        """
        ...

    def learn_non_data(self) -> Iterator[None]:
        """Work the non-data counts below may need (a header walk of a segment whose ranges
        were not saved), in slices: drive it between awaits on the event loop."""
        ...

    def non_data_offsets(self, start: int, end: int) -> int:
        """Offsets of `[start, end)` holding no data record (control or empty batches)."""
        ...

    def data_records(self, start: int, end: int) -> int:
        """Offsets of `[start, end)` less the non-data ones: what lag counts."""
        ...

    def non_data_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """The non-data ranges within `[start, end)`, as (first, last) inclusive."""
        ...

    def first_data_offset(self, offset: int) -> int:
        """The first offset at or after `offset` no non-data range holds (else the log end)."""
        ...

    def batch_timestamp(self, offset: int) -> int | None:
        """The header timestamp of the batch holding `offset` (None: no intact batch)."""
        ...

    @property
    def size_bytes(self) -> int:
        """Bytes of all its segment files (Kafka's kafka.log:type=Log,name=Size)."""
        ...

    def flush(self) -> None: ...

    @property
    def sync_due(self) -> bool:
        """``log.flush.interval.messages`` records are appended and not yet synced."""
        ...

    def start_flush(self) -> list[PendingSync]:
        """Mark every dirty segment clean and return their fsyncs, to run in a thread."""
        ...

    def close(self) -> None: ...

    def apply_retention(self, now_ms: int, min_retained_offset: int | None = None) -> int:
        """Delete whole expired segments, never the active one; returns how many."""
        ...

    def log_start_target(self, offset: int) -> int:
        """The log start a DeleteRecords to `offset` sets (-1: the log end); never lower.

        :raises storage.errors.OffsetOutOfRange: `offset` is past the log end.
        """
        ...

    def save_log_start(self, offset: int) -> None:
        """Make `offset` the durable log start; may run in a thread (touches its own file).

        :raises storage.errors.KafkaStorageError: not written; nothing changed.
        """
        ...

    def advance_log_start(self, offset: int, min_retained_offset: int | None = None) -> int:
        """Move the log start to `offset` once saved; delete the segments wholly below it
        (not those at or after `min_retained_offset`); returns how many."""
        ...

    def delete(self) -> None: ...
