"""What a read_committed fetch (isolation level 1) may see of a partition read: only what lies
below the last stable offset, and the aborted transactions in that range, which the client
uses to drop aborted records (Kafka's `UnifiedLog.read` with `FetchIsolation.TXN_COMMITTED`
and `collectAbortedTransactions`). The read itself is unchanged: while no transaction is open
the LSO is the log end and nothing is cut; otherwise the result's headers are walked, never
its records.
"""

from __future__ import annotations

from protocol.record_batch import iter_batch_headers
from storage.log import PartitionLog
from storage.producer_state import AbortedTxn

READ_COMMITTED = 1


def below_lso(records: bytes, lso: int) -> bytes:
    """The whole batches of `records` that start below `lso` (a transaction's first batch
    starts a batch, so no batch straddles it)."""
    for pos, header in iter_batch_headers(records):
        if header.base_offset >= lso:
            return records[:pos]
    return records


def committed_view(
    plog: PartitionLog, fetch_offset: int, records: bytes, lso: int
) -> tuple[bytes, list[AbortedTxn]]:
    """`records` (read at `fetch_offset`) cut at the LSO, and the aborted transactions a
    client reading them must know of."""
    if lso < plog.log_end_offset and records:
        records = below_lso(records, lso)
    return records, plog.aborted_transactions(fetch_offset, lso)
