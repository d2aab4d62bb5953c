"""What an acquisition policy is: the rule that picks the records a ShareFetch takes.

`SharePartition.acquire` chooses one policy per fetch (from the group's limits and the
request) and hands it the window and the fetch; the policy walks the log's batches
(`ShareWindow.walk`) and acquires through the window's calls, never by touching ranges
itself. Policies import the window and nothing of the share-partition or its manager (an
import-linter contract says so), so a new rule is one module here, its test, and one line in
`SharePartition.acquire`'s choice.

- `batch_optimized.py`: whole stored batches (the default);
- `record_limit.py`: at most MaxRecords, the last range may end inside a batch (KIP-1206);
- `key_ordered.py`: one record per key in flight, each key with one member (seed 001);
- `not_before.py`: records that wait before they may be acquired again (retry backoff);
  every policy skips them through the window (`acquire(..., now_ms)`);
- `scheduled.py`: on topics with scheduled delivery, records join the window waiting until
  their `shoal.deliver.at.ms`, before the policy chosen runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import NamedTuple
from typing import Protocol

from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ReadCommitted
from broker.share.window import ShareWindow

KeyHashes = Mapping[int, int | None]
"""offset -> 32-bit hash of the record's key (None: a null key), for key-ordered groups. An
offset the mapping lacks holds no record (a compacted gap): it is handed out unordered."""


class Fetch(NamedTuple):
    """One member's fetch of one share-partition, as a policy sees it.

    `spans` start at the batch holding `cursor` (the window's first AVAILABLE offset, or its
    end) and run in log order. `keys` is given to key-ordered groups only. `committed` is
    given to read_committed groups (share.isolation.level): the LSO bounds what the fetch
    may take, as `max_records` and `max_record_locks` do, and aborted batches are archived
    (`ShareWindow.walk` applies both, for every policy).
    """

    member_id: str
    spans: Sequence[BatchSpan]
    cursor: int
    max_records: int
    now_ms: int
    deadline: int  # the lock deadline of what is acquired
    max_record_locks: int
    keys: KeyHashes | None = None
    committed: ReadCommitted | None = None
    # Scheduled delivery: offset -> delivery time (epoch ms) of the records the spans hold
    # that wait, from `Scheduled.times_from` on (None: the topic has no scheduled delivery).
    deliver_at: Mapping[int, int] | None = None
    # Key-ordered groups: at most this many records of one key in flight (1: in order).
    per_key: int = 1


class AcquisitionPolicy(Protocol):
    def acquire(self, window: ShareWindow, fetch: Fetch) -> list[AcquiredRecords]:
        """Acquire records for `fetch.member_id`; the ranges taken, in offset order."""
        ...
