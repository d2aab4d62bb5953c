"""The Persister over share-state records in each partition's own log (seed 000).

`storage.share_state_log.ShareStateLog` writes and reads the SHARE_CHECKPOINT / SHARE_DELTA
chains, the snapshot files and the earliest share offsets, in the records' own form; this
adds the three Persister calls that speak the share core's durable ranges (`StateRange`).
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.share.persister import PersistedState
from broker.share.persister import ShareChange
from broker.share.persister import batches_of
from broker.share.persister import ranges_of
from broker.share.share_partition import SharePartitionKey
from broker.share.window import StateRange
from protocol.share_state import StateBatch
from storage.share_state_log import ShareStateLog


class ShareStatePersister(ShareStateLog):
    """Share state as control records in each partition's own log, with snapshot files under
    `state_dir` (None: no snapshot files; recovery scans the log)."""

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        window = self.read_window(key, log_start_offset, now_ms)
        if window is None:
            return None
        return PersistedState(window.start_offset, window.end_offset, ranges_of(window.batches))

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
        """A delta, or a checkpoint when due (see `ShareStateLog.write_change`).

        :raises storage.errors.KafkaStorageError: nothing was written; drop the plan.
        """
        if change.empties and change.ranges:  # the common case: no range to convert
            return self.write_emptied(key, change.end_offset, now_ms)

        def after() -> tuple[int, tuple[StateBatch, ...]]:
            start, ranges = change.after()
            return start, batches_of(ranges)

        return self.write_change(
            key, batches_of(change.ranges), end_offset=change.end_offset,
            empties=change.empties, after=after, now_ms=now_ms,
        )  # fmt: skip

    def checkpoint(
        self,
        key: SharePartitionKey,
        start_offset: int,
        end_offset: int,
        ranges: Sequence[StateRange],
        now_ms: int,
    ) -> None:
        """The window as a new checkpoint (`ShareStateLog.write_window`).

        :raises storage.errors.KafkaStorageError: nothing was written.
        """
        self.write_window(key, start_offset, end_offset, batches_of(ranges), now_ms)
