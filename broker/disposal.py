"""Large lists freed a chunk at a time.

Freeing a list of a million objects is one C call (~40 ms of CPU, four times that on a loaded
machine) that holds the GIL, whichever thread makes it: the event loop waits for it even when a
worker thread drops the last reference. Freed a chunk at a time, in the thread that made use of
them (a response encoder), the GIL is handed over between chunks.
"""

from __future__ import annotations

from typing import Any

CHUNK = 10_000  # ~0.4 ms of freeing


def free_in_chunks(items: list[Any]) -> None:
    """Empty `items`, from its end, CHUNK elements per C call."""
    while items:
        del items[-CHUNK:]
