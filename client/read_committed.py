"""What a read_committed consumer keeps of a Fetch answer (isolation_level=1): the broker has cut
the records at the last stable offset and listed the aborted transactions they hold; the client
drops the batches of those transactions, from batch headers alone.

Kafka's consumer rule (`CompletedFetch.nextFetchedRecord`, `isBatchAborted`,
`consumeAbortedTransactionsUpTo` in apache/kafka clients/.../consumer/internals/): the aborted
transactions, ordered by first offset, enter the set of aborted producer ids as the batches read
reach their first offset (first offset <= the batch's last offset); a transactional batch of a
producer in that set is skipped; the producer's ABORT marker takes it out of the set; control
batches are never records.

Kafka reads the marker's control record to tell ABORT from COMMIT; here the header is enough: a
producer has one transaction open at a time, so the first control batch of a producer at or
after an aborted transaction's first offset is that transaction's ABORT marker.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from client.fetched_batches import corrupt
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import iter_batch_headers

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}

AbortedTxn = tuple[int, int]  # producer id, first offset


def aborted_of(partition: Any) -> list[AbortedTxn]:
    """The aborted transactions of a Fetch response's partition (null below v4 or when
    read_uncommitted)."""
    return [
        (int(t.producer_id), int(t.first_offset))
        for t in getattr(partition, "aborted_transactions", None) or ()
    ]


def committed_batches(data: bytes, aborted: Iterable[AbortedTxn]) -> bytes:
    """The batches of `data` a read_committed consumer reads: without those of aborted
    transactions and without control batches. `data` itself when nothing is aborted (the
    decoders skip control batches anyway); else the kept batches joined (a trailing partial
    batch, which the decoders ignore, is left out).

    :raises KafkaError: CORRUPT_MESSAGE for a header that cannot be a batch.
    """
    pending = sorted((first, pid) for pid, first in aborted)
    if not pending:
        return data
    view = memoryview(data)
    active: set[int] = set()
    kept: list[memoryview] = []
    try:
        for pos, h in iter_batch_headers(view):
            if h.producer_id >= 0:
                while pending and pending[0][0] <= h.last_offset:
                    active.add(heapq.heappop(pending)[1])
                if h.is_control:
                    active.discard(h.producer_id)  # the ABORT marker ends the aborted one
                elif h.is_transactional and h.producer_id in active:
                    continue
            if not h.is_control:
                kept.append(view[pos : pos + h.size])
    except InvalidRecordBatch as e:
        raise corrupt(f"fetched batches: {e}") from e
    return b"".join(kept)
