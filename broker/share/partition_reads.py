"""One partition's part of a ShareFetch: read stored batches once (with their header spans),
acquire ranges over those spans, and return the bytes of the batches that hold acquired
records, unchanged. Records are never decoded, except a key-ordered group's keys
(`key_hashes.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from broker.share.deliver_at import deliver_at_times
from broker.share.key_hashes import key_hashes
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import SharePartition
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ReadCommitted
from storage.errors import OffsetOutOfRange
from storage.log import BatchSpan as StoredSpan
from storage.log import PartitionLog

# One ShareFetch reads at most this much of a partition's log: MaxBytes is 50 MiB from
# librdkafka while MaxRecords is 500, and reading 50 MiB to hand out 500 records is waste.
# A first batch above it is still read whole when the partition's budget allows it (or it is
# the one batch KIP-74 lets through whatever its size).
READ_CHUNK_BYTES = 1024 * 1024
MAX_READS_PER_FETCH = 8
# A fetch of a topic with scheduled delivery reads the headers of about this many records at
# most (the first batch whole): each fetch's decoding stays within a few milliseconds.
SCHEDULE_DECODE_RECORDS = 2000


class FetchedPartition(NamedTuple):
    error_code: ErrorCode
    records: bytes
    acquired: list[AcquiredRecords]


NOTHING = FetchedPartition(ErrorCode.none, b"", [])


class PartitionRead(NamedTuple):
    """A fetch of one share-partition, as `read_and_acquire` does it."""

    member_id: str
    max_bytes: int
    max_records: int
    now_ms: int
    record_limit: bool = False
    first_batch_max: int | None = None
    # The topic has shoal.scheduled.delivery.enable=true: records' delivery times are read.
    scheduled: bool = False


def read_and_acquire(
    sp: SharePartition,
    plog: PartitionLog,
    read: PartitionRead,
    metrics: ShareMetrics,
    after: Callable[[SharePartition, int], None],
) -> FetchedPartition:
    """Acquire from `sp`: records from batches read within `max_bytes`, the first batch
    whole even above it up to `first_batch_max` (None: whatever its size, KIP-74's one batch
    that lets a consumer progress). `after` is the manager's bookkeeping of the change."""
    if read.max_records <= 0:
        return NOTHING
    # A read may find only control batches (share state written between data): they are
    # skipped, and the next stretch of log is read, a bounded number of times.
    for _ in range(MAX_READS_PER_FETCH):
        offset = sp.next_fetch_offset(read.now_ms)
        # A read_committed group reads no further than the LSO (Kafka's TXN_COMMITTED read).
        end = plog.last_stable_offset if sp.read_committed else plog.log_end_offset
        if offset is None or offset >= end:
            break
        fetched = _acquire(sp, plog, read, offset, metrics, after)
        if fetched is not None:
            return fetched
        if sp.next_fetch_offset(read.now_ms) == offset:
            break
    return NOTHING


def _decodable(spans: list[StoredSpan], lo: int) -> list[StoredSpan]:
    """The spans a scheduled-delivery fetch reads the headers of: those from `lo` on, up to
    about SCHEDULE_DECODE_RECORDS records (the first whole, whatever its size), and the
    ones before `lo`, whose times are placed already. Decoding 1 MiB of small records takes
    ~70 ms on a loaded machine; a fetch must not hold the loop that long."""
    budget, first = SCHEDULE_DECODE_RECORDS, True
    for i, span in enumerate(spans):
        if span.last_offset < lo:
            continue
        budget -= span.last_offset - max(span.base_offset, lo) + 1
        if budget < 0:
            return spans[: i + 1] if first else spans[:i]
        first = False
    return spans


def _share_span(s: StoredSpan) -> BatchSpan:
    # An empty batch (offsets the cleaner removed, or storage's stand-in for damaged ones,
    # already logged and counted) is archived like a control batch.
    return BatchSpan(s.base_offset, s.last_offset, s.is_control or not s.has_records, s.producer_id)


def _committed(plog: PartitionLog, offset: int, spans: Sequence[StoredSpan]) -> ReadCommitted:
    """A read_committed fetch's bound: the LSO, and the aborted transactions the read meets
    (from the aborted index, no further than the read goes, or the LSO)."""
    lso = plog.last_stable_offset
    upper = min(lso, spans[-1].last_offset + 1) if spans else offset
    aborted: dict[int, list[tuple[int, int]]] = {}
    for txn in plog.aborted_transactions(offset, upper) if upper > offset else ():
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return ReadCommitted(lso, aborted)


def _acquire(
    sp: SharePartition,
    plog: PartitionLog,
    read: PartitionRead,
    offset: int,
    metrics: ShareMetrics,
    after: Callable[[SharePartition, int], None],
) -> FetchedPartition | None:
    """Read once from `offset` and acquire what the read holds; None if nothing."""
    # Enough batches for max_records new records past whatever is in flight after `offset`.
    wanted = read.max_records + max(0, sp.speo - offset)
    start = max(offset, plog.log_start_offset)
    try:
        data, spans = plog.read_with_spans(
            start, min(read.max_bytes, READ_CHUNK_BYTES), wanted, read.first_batch_max
        )
    except OffsetOutOfRange:
        return None
    keys = None
    if sp.key_ordering:  # records are decoded for key-ordered groups only
        lo, hi = sp.keys_wanted()
        if sp.read_committed:  # nor past the LSO: what waits there is not decoded yet
            hi = min(hi, plog.last_stable_offset)
        spans = [s for s in spans if s.base_offset < hi]  # beyond, the window cannot grow
        keys = key_hashes(data, [s for s in spans if s.last_offset >= lo])
    deliver_at = None
    if read.scheduled:  # records' headers are read on topics with scheduled delivery only
        lo = sp.schedule_from(read.now_ms)
        spans = _decodable(spans, lo)  # what follows is acquired by a later fetch
        wanted_spans = [s for s in spans if s.last_offset >= lo]
        deliver_at = deliver_at_times(data, wanted_spans, read.now_ms, sp.key)
    acquired = sp.acquire(
        read.member_id,
        [_share_span(s) for s in spans],
        max_records=read.max_records,
        now_ms=read.now_ms,
        keys=keys,
        record_limit=read.record_limit,
        committed=_committed(plog, offset, spans) if sp.read_committed else None,
        deliver_at=deliver_at,
    )
    after(sp, read.now_ms)
    if not acquired:
        return None
    metrics.on_records_acquired(sum(a.last_offset - a.first_offset + 1 for a in acquired))
    # Trim to the batches that hold acquired records; the client drops the rest anyway.
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    kept = [s for s in spans if s.last_offset >= first and s.base_offset <= last]
    start, end = kept[0].position_in_result, kept[-1].position_in_result + kept[-1].size
    return FetchedPartition(ErrorCode.none, data[start:end], acquired)
