"""Producer ids for InitProducerId: never the same id twice, whatever happened to the disk.

Ids are handed out from blocks, as Kafka's controller does (`ProducerIdControlManager`: blocks
of 1000, each recorded as a `ProducerIdsRecord` in the metadata log before any id in it is
used). Here the end of the current block is written to `<data dir>/producer-ids` before any id
in it is used, so a restarted broker goes on above every id it handed out.

That file is not the only record, and not trusted alone: every id a producer wrote with is in
its partitions' producer state (snapshot plus batch headers, which recovery reads anyway). A
new producer given an old producer's id would have its first batches taken for the old one's
retries: acknowledged, answered with the old offsets, never written. So the allocator also
starts above the highest id any log holds; when the file is missing, garbled or behind the
logs, it is rebuilt from there, with one warning. Ids handed out but not yet written with are
in no log: the rebuilt start skips the rest of that id's block and the whole next one.

With N broker processes (`shoal serve --processes N`, docs/multicore.md) process `i` hands out
only ids `i + N * k`: the file and the blocks count `k`, so the processes never share an id
without talking to each other.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from broker.failure_episode import FailureEpisode
from storage.fsutil import atomic_write

BLOCK = 1000
_MAX_BLOCK_END = 2**63 - 1 - BLOCK  # the next block must still fit in an int64
_MAX_DIGITS = 19
MISSING = "missing"

log = structlog.get_logger("shoal.producer_ids")


def read_block_end(path: Path) -> tuple[int | None, str]:
    """The saved end of the current block, or None and what was found instead."""
    try:
        text = path.read_bytes().strip()
    except FileNotFoundError:
        return None, MISSING
    except OSError as e:
        return None, f"unreadable: {e.strerror}"
    if not (text.isdigit() and len(text) <= _MAX_DIGITS) or int(text) > _MAX_BLOCK_END:
        return None, f"garbled: {text[:40]!r}"
    return int(text), ""


def rebuilt_start(recorded: int) -> int:
    """The first id after a lost file: the block after the next one above `recorded`."""
    return (recorded // BLOCK + 2) * BLOCK


class ProducerIdAllocator:
    def __init__(
        self, path: Path, recorded: int | None = -1, *, stride: int = 1, offset: int = 0
    ) -> None:
        """`recorded`: the highest producer id any partition's log holds (-1: none; None: not
        known until every log is open, when `start` is called; no id is handed out before).
        `stride`, `offset`: ids are `offset + stride * k` (N processes: N and the node id)."""
        self._path = path
        self._stride, self._offset = stride, offset
        self._next = self._limit = 0
        self._started = asyncio.Event()
        self._episode = FailureEpisode(
            log, "producer id block not recorded; no id handed out until it is",
            "producer id blocks recorded again",
        )  # fmt: skip
        if recorded is not None:
            self.start(recorded)

    @property
    def started(self) -> bool:
        return self._started.is_set()

    async def wait_started(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until ids can be handed out; whether they can."""
        if not self._started.is_set():
            try:
                await asyncio.wait_for(self._started.wait(), timeout_s)
            except TimeoutError:
                return False
        return True

    def start(self, recorded: int) -> None:
        """Start above `recorded`, the highest id any log holds, and above the saved block."""
        if self._started.is_set():
            return
        path = self._path
        if recorded >= 0:  # the highest k whose id is at or below it
            recorded = max(-1, (recorded - self._offset) // self._stride)
        saved, found = read_block_end(path)
        if saved is not None and saved > recorded:
            start = saved
        elif found == MISSING and recorded < 0:
            start = 0  # a new data dir: no id was ever handed out
        else:
            if saved is not None:  # restored from an old copy, or ids a client made up
                found = f"block end {saved}, at or below a recorded producer id"
            start = rebuilt_start(recorded)
            self._rebuild(found, recorded, start)
        self._next = start
        self._limit = start
        self._started.set()

    def _rebuild(self, found: str, recorded: int, start: int) -> None:
        error = ""
        try:
            atomic_write(self._path, str(start).encode())
        except OSError as e:  # a full disk: the first allocation writes it again
            error = e.strerror or str(e)
        log.warning(
            "producer-ids file rebuilt from the partitions' producer state",
            path=str(self._path), found=found, highest_recorded_id=recorded, next_id=start,
            **({"not_written": error} if error else {}),
        )  # fmt: skip

    def allocate(self) -> int:
        """The next id; its block's end is durable first.

        :raises OSError: the block end could not be written; no id was handed out.
        :raises RuntimeError: not started (`start`).
        """
        if not self._started.is_set():
            raise RuntimeError("producer ids are handed out once every log is open")
        if self._next >= self._limit:
            limit = self._next + BLOCK
            try:
                atomic_write(self._path, str(limit).encode())
            except OSError as e:
                self._episode.failed(e, path=str(self._path))
                raise
            self._episode.succeeded(path=str(self._path))
            self._limit = limit
        pid = self._next
        self._next += 1
        return self._offset + self._stride * pid
