"""broker.gc_pause: a client sending large requests back to back cannot keep collection off."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from broker import gc_pause


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    """Appended to: 1 for each full collection (generation 2) that starts."""
    seen: list[int] = []

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(1)

    gc.callbacks.append(callback)
    yield seen
    gc.callbacks.remove(callback)


def test_a_pause_taken_again_before_any_collection_ran_forces_one(
    full_collections: list[int],
) -> None:
    """Re-enabling collection runs none: a pause taken again at once would keep it off for
    as long as large requests come back to back."""
    assert gc_pause.hold()
    gc_pause.release()
    full_collections.clear()
    assert gc_pause.hold()  # at once: no allocations, no collection in between
    try:
        assert full_collections, "paused again with no collection since the last pause"
        assert not gc.isenabled()
    finally:
        gc_pause.release()
    assert gc.isenabled()


def test_a_pause_after_a_collection_forces_none(full_collections: list[int]) -> None:
    assert gc_pause.hold()
    gc_pause.release()
    gc.collect(0)  # as the allocations between two requests run one
    full_collections.clear()
    assert gc_pause.hold()
    try:
        assert not full_collections
    finally:
        gc_pause.release()
