"""Idempotent-producer state of one partition, after Kafka's ProducerStateManager.

For each producer id: its epoch and the last five batches it wrote (sequence range and
offsets), enough to answer a retried batch with its original offsets. Only batch
headers are needed, so the state is rebuilt by walking headers.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

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
            if current is None and entry is not None and entry.batches:
                current = (entry.epoch, entry.batches[-1].last_seq)
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

    def expire(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        stale = [pid for pid, e in self.producers.items() if now_ms - e.last_timestamp > max_age_ms]
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
