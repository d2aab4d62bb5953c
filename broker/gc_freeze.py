"""Objects made in bulk after start, that live as long as their partitions, moved out of the
garbage collector's sight (`gc.freeze`), as `Server.start` does with what it opened.

A full collection walks every tracked object that is not frozen, on whichever thread allocates
at the time, the event loop's included (it holds the GIL). A partition's log is ~35 of them:
20,000 partitions opened after start (the logs a broker opens once it listens, a CreateTopics
of 10,000) made a full collection, triggered by a Prometheus scrape's samples, walk 700,000
objects: 0.2-0.75 s with every client waiting.

What is frozen is never collected as cyclic garbage, even once freed by its last reference
going (objects without cycles are freed as ever): a freeze after a bulk creation keeps the
little cyclic garbage made since the last collection, once per such creation.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import TypeVar

from broker import gc_pause

T = TypeVar("T")

# Fewer partitions than this add less than a tenth of a broker's own frozen objects.
BULK_PARTITIONS = 1_000


def after_bulk(partitions: int) -> None:
    """`partitions` logs were just opened: freeze them if they are many."""
    if partitions >= BULK_PARTITIONS:
        gc.freeze()


async def loaded_in_bulk(load: Callable[[], T], count: Callable[[T], int]) -> T:
    """`load()` in a thread, with automatic collection paused meanwhile (`broker.gc_pause`: a
    million ACL bindings or users are millions of objects, whose making would trigger
    collections walking them all on the loop), and what it made frozen if `count` of it is
    `BULK_PARTITIONS` or more (they live until the next change)."""
    paused = gc_pause.hold()
    try:
        loaded = await asyncio.to_thread(load)
        if count(loaded) >= BULK_PARTITIONS:
            gc.freeze()
        return loaded
    finally:
        if paused:
            gc_pause.release()
