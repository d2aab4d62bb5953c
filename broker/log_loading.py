"""Requests that arrive while the start is still opening the partitions' logs (issue 28).

The broker listens before every log is open (`LogManager(lazy=True)`, opened in slices by
`Server._open_logs`); a request for a partition not open yet opens it first (`LogManager.log`),
so it is never answered wrongly. A request that names thousands of such partitions (a consumer's
ListOffsets or Fetch of every partition, a producer's first Produce) would then hold the event
loop for as long as they all take: `open_first` opens them in slices, yielding between, before
the handler's own work. Its connection's later requests wait meanwhile (`broker.request_order`).
A log whose recovery after an unclean stop takes longer than a slice is awaited a slice at a
time, others served between (`LogManager.open_slice`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from storage import LogManager
from storage.errors import KafkaStorageError

SLICE_S = 0.02


async def open_first(logs: LogManager, partitions: Iterable[tuple[str | None, int]]) -> None:
    """Open those of `partitions` (topic name, index; None: an unknown topic) not open yet."""
    started = time.monotonic()
    for topic, partition in partitions:
        if topic is None or not logs.is_pending(topic, partition):
            continue
        while True:
            try:
                if logs.open_slice(topic, partition, SLICE_S):
                    break
            except KafkaStorageError:  # said; the handler answers for it
                break
            await asyncio.sleep(0)  # a long recovery: others run between its slices
            started = time.monotonic()
        if time.monotonic() - started >= SLICE_S:
            await asyncio.sleep(0)
            started = time.monotonic()
