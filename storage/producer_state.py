"""Idempotent-producer state of one partition, after Kafka's ProducerStateManager.

For each producer id: its epoch and the last five batches it wrote (sequence range and
offsets), enough to answer a retried batch with its original offsets. Only batch
headers are needed, so the state is rebuilt by walking headers.

Transactions (Kafka's `ProducerStateManager.ongoingTxns` and the `.txnindex` of each segment):
the first offset of each producer's open transaction (its first transactional batch), whose
lowest is the partition's last stable offset (`UnifiedLog.fetchLastStableOffsetMetadata`),
and every aborted transaction's range (producer, first offset, offset of its ABORT marker),
which Fetch returns to read_committed consumers. Both are rebuilt from headers, and the
markers' types, read from their one record.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from typing import NamedTuple

from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import BatchHeader
from storage.errors import InvalidProducerEpoch
from storage.errors import OutOfOrderSequence

CACHED_BATCHES = 5
_INT32_MAX = 2**31 - 1
# Producer ids at or above this were made up by a client: no allocator hands out 2**62 ids
# (a million a second for 146,000 years). They are not counted in `max_producer_id`, so one
# such batch cannot push the broker's allocator to the end of the id space.
ISSUABLE_PRODUCER_IDS = 2**62


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    last_timestamp: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    def find(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


class AbortedTxn(NamedTuple):
    """An aborted transaction's range in the log: as Kafka's `AbortedTxn` of the .txnindex."""

    producer_id: int
    first_offset: int
    last_offset: int  # the offset of its ABORT marker


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def _idempotent(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and not header.is_control


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # The highest producer id this log has ever recorded (below ISSUABLE_PRODUCER_IDS),
        # kept when its producer expires: the broker's allocator starts above it (-1: none).
        self.max_producer_id = -1
        # Producer id -> first offset of its open transaction (Kafka's ongoingTxns).
        self.ongoing: dict[int, int] = {}
        # Aborted transactions in marker order (so sorted by last offset), above the log start.
        self.aborted: list[AbortedTxn] = []
        # The longest aborted transaction (ABORT marker offset - first offset) ever recorded:
        # bounds `aborted_between`'s scan. Never lowered (forgetting keeps it an upper bound).
        self._longest = 0
        self.expired = False  # producers were forgotten since the snapshot was written

    def check(self, headers: Sequence[BatchHeader]) -> BatchMetadata | None:
        """Validate the batches of one append; return a duplicate's metadata if any.

        Nothing changes until ``update``.

        :raises InvalidProducerEpoch: an epoch older than the producer's.
        :raises OutOfOrderSequence: a gap, or a new epoch not starting at sequence 0.
        """
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq)
        for header in headers:
            if not _idempotent(header):
                continue
            entry = self.producers.get(header.producer_id)
            if entry is not None:
                duplicate = entry.find(
                    header.producer_epoch, header.base_sequence, header.last_sequence
                )
                if duplicate is not None:
                    return duplicate
            current = pending.get(header.producer_id)
            if current is None and entry is not None:
                if entry.batches:
                    current = (entry.epoch, entry.batches[-1].last_seq)
                elif header.producer_epoch < entry.epoch:  # fenced by a marker's epoch
                    _check_sequence(header, entry.epoch, -1)
            if current is not None:
                _check_sequence(header, *current)
            # An unknown producer (new, or its state expired) may start anywhere, as in Kafka.
            pending[header.producer_id] = (header.producer_epoch, header.last_sequence)
        return None

    def update(self, header: BatchHeader, base_offset: int) -> None:
        """Record a batch written at ``base_offset`` (its header predates the rewrite)."""
        if not _idempotent(header):
            return
        if self.max_producer_id < header.producer_id < ISSUABLE_PRODUCER_IDS:
            self.max_producer_id = header.producer_id
        if header.attributes & TRANSACTIONAL_MASK and header.producer_id not in self.ongoing:
            self.ongoing[header.producer_id] = base_offset  # its transaction's first batch
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            entry = ProducerEntry(header.producer_epoch, header.max_timestamp)
            self.producers[header.producer_id] = entry
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                base_offset,
                base_offset + header.last_offset_delta,
            )
        )

    def end_txn(self, producer_id: int, epoch: int, commit: bool, marker_offset: int) -> None:
        """A COMMIT or ABORT marker written at `marker_offset` ends the producer's transaction.

        A marker of a newer epoch (the coordinator fenced the producer: Kafka writes the abort
        with the bumped epoch) makes that epoch the producer's; its next batch starts at 0.
        """
        entry = self.producers.get(producer_id)
        if entry is None or entry.epoch < epoch:
            last_ts = entry.last_timestamp if entry is not None else -1
            self.producers[producer_id] = ProducerEntry(epoch, last_ts)
        first = self.ongoing.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))
            self._longest = max(self._longest, marker_offset - first)

    def active(self) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, open transaction's first offset
        or -1) of every producer known here, as DescribeProducers lists them."""
        return [
            (pid, e.epoch, e.batches[-1].last_seq if e.batches else -1, e.last_timestamp,
             self.ongoing.get(pid, -1))
            for pid, e in self.producers.items()
        ]  # fmt: skip

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions a read of [start, upper) meets: those ending at or after
        `start` and beginning before `upper` (Kafka's `TransactionIndex.collectAbortedTxns`)."""
        aborted = self.aborted
        i = bisect_left(aborted, start, key=lambda a: a.last_offset)
        # One beginning before `upper` ends before `upper + longest`: none further can, so a
        # read near the start of a long index does not walk all of it (1M entries: ~50 ms).
        j = bisect_left(aborted, upper + self._longest, lo=i, key=lambda a: a.last_offset)
        return [a for a in aborted[i:j] if a.first_offset < upper]

    def forget_below(self, log_start: int) -> None:
        """Aborted transactions wholly below the log start are gone with their segments."""
        aborted = self.aborted
        if aborted and aborted[0].last_offset < log_start:
            del aborted[: bisect_left(aborted, log_start, key=lambda a: a.last_offset)]

    def forget_aborted(self, ended: Iterable[tuple[int, int]]) -> int:
        """Aborted transactions whose ABORT marker (producer id, marker offset) the cleaner
        removes: a read_committed consumer told of one would look for a marker no longer there
        (Kafka's cleaner keeps in the cleaned `.txnindex` only the aborted transactions whose
        markers it keeps). Returns how many were forgotten."""
        doomed = set(ended)
        kept = [a for a in self.aborted if (a.producer_id, a.last_offset) not in doomed]
        forgotten = len(self.aborted) - len(kept)
        self.aborted = kept
        return forgotten

    def expire(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        stale = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_timestamp > max_age_ms and pid not in self.ongoing
        ]
        for pid in stale:
            del self.producers[pid]
        if stale:
            self.expired = True
        return len(stale)

    def to_json(self, offset: int) -> bytes:
        """Snapshot valid for a log whose end offset is ``offset``."""
        producers = [
            [pid, e.epoch, e.last_timestamp, [list(vars_of(m)) for m in e.batches]]
            for pid, e in self.producers.items()
        ]
        doc = {
            "version": 1,
            "offset": offset,
            "producers": producers,
            "max_producer_id": self.max_producer_id,  # optional: older snapshots lack it
            "ongoing": [[pid, first] for pid, first in self.ongoing.items()],  # optional too
            "aborted": [list(a) for a in self.aborted],  # optional too
        }
        return json.dumps(doc).encode()

    @classmethod
    def from_json(cls, data: bytes) -> tuple[ProducerStateManager, int]:
        """Load a snapshot; returns the state and the log end offset it covers.

        :raises ValueError: on anything unreadable.
        """
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise ValueError("unknown producer snapshot version")
        state = cls()
        for pid, epoch, last_ts, batches in doc["producers"]:
            entry = ProducerEntry(int(epoch), int(last_ts))
            entry.batches.extend(BatchMetadata(*map(int, b)) for b in batches)
            state.producers[int(pid)] = entry
        ids = (int(doc.get("max_producer_id", -1)), *state.producers)
        state.max_producer_id = max((p for p in ids if p < ISSUABLE_PRODUCER_IDS), default=-1)
        state.ongoing = {int(pid): int(first) for pid, first in doc.get("ongoing", [])}
        state.aborted = [AbortedTxn(*map(int, a)) for a in doc.get("aborted", [])]
        state._longest = max((a.last_offset - a.first_offset for a in state.aborted), default=0)
        return state, int(doc["offset"])


def vars_of(meta: BatchMetadata) -> tuple[int, int, int, int]:
    return meta.first_seq, meta.last_seq, meta.base_offset, meta.last_offset


def _check_sequence(header: BatchHeader, epoch: int, last_seq: int) -> None:
    if header.producer_epoch < epoch:
        raise InvalidProducerEpoch(
            f"producer {header.producer_id} epoch {header.producer_epoch} < current {epoch}"
        )
    if header.producer_epoch > epoch:
        if header.base_sequence != 0:
            raise OutOfOrderSequence(
                f"producer {header.producer_id} new epoch {header.producer_epoch} "
                f"starts at sequence {header.base_sequence}, not 0"
            )
    elif not in_sequence(last_seq, header.base_sequence):
        raise OutOfOrderSequence(
            f"producer {header.producer_id} sequence {header.base_sequence} "
            f"after {last_seq} (epoch {epoch})"
        )
