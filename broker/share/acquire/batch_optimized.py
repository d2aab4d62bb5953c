"""share.acquire.mode=batch_optimized (the default): whole stored batches, from headers alone.

As Kafka's `SharePartition.acquire`: batches are taken whole while fewer than MaxRecords
records are taken, so the batch holding the MaxRecords-th record goes whole (MaxRecords may be
exceeded to keep batch boundaries). New batches join the window while it stays within
`max_record_locks`, and the first new batch of a fetch whenever the window has room for one.
"""

from __future__ import annotations

from broker.share.acquire.policy import Fetch
from broker.share.window import AcquiredRecords
from broker.share.window import ShareWindow


class BatchOptimized:
    def acquire(self, window: ShareWindow, fetch: Fetch) -> list[AcquiredRecords]:
        out: list[AcquiredRecords] = []
        taken = 0
        added_new = False
        for lo, last in window.walk(fetch.spans, fetch.cursor, fetch.committed):
            if last >= window.end:
                if not window.may_extend(last, added_new, fetch.max_record_locks):
                    break
                added_new = True
            taken += window.acquire(
                lo, last, fetch.member_id, fetch.deadline, out, now_ms=fetch.now_ms
            )
            if taken >= fetch.max_records:
                break
        return out


BATCH_OPTIMIZED = BatchOptimized()
