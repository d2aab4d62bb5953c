"""How much of the log share-state recovery reads: a group with no records costs no scan once
the partition's log has been scanned, so many groups joining one partition stay linear."""

from __future__ import annotations

from protocol.share_state import ShareCheckpoint
from storage.memory_log import MemoryLog
from storage.share_state_store import ShareStateStore


class CountingLog(MemoryLog):
    """An in-memory log that counts the reads recovery makes."""

    reads = 0

    def read_with_spans(self, offset: int, max_bytes: int):  # type: ignore[no-untyped-def]
        self.reads += 1
        return super().read_with_spans(offset, max_bytes)


def test_new_groups_do_not_rescan_the_log() -> None:
    plog = CountingLog()
    store = ShareStateStore(plog, None)
    for g in range(50):
        store.append(ShareCheckpoint(f"g{g}", 0, 0, 0, ()), now_ms=1)
    assert store.recover("g7") is not None  # found by scanning
    scans = plog.reads
    for g in range(50, 100):  # groups that never wrote anything
        assert store.recover(f"g{g}") is None
    assert plog.reads == scans
    store.append(ShareCheckpoint("g50", 0, 3, 3, ()), now_ms=1)
    recovered = store.recover("g50")  # a group's own records are found after they are written
    assert recovered is not None and recovered.start_offset == 3
