"""Partitions opened after start are frozen out of the garbage collector's sight, so that a
full collection (a Prometheus scrape's samples trigger one, in the scrape thread, holding the
GIL and with it the event loop) does not walk their logs (promise 3, issue 27).

Measured before: 20,000 partitions opened once the broker listened left 700,000 objects for a
full collection to walk, and one, in the scrape thread, took 749 ms (load 10) while the probe's
worst round trip went from 60 to 375 ms. After: 600 objects, no collection over 20 ms, the
probe's worst 44 ms (`broker.gc_freeze`). The test counts what a full collection would walk,
which does not depend on the machine's load.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import pytest

from client import Admin
from tests.brokers import closed_wide_topic
from tests.brokers import make_server

# `latency`: guards a stall, and counts the process's objects (alone: `make test`).
pytestmark = [pytest.mark.integration, pytest.mark.latency]
PARTITIONS = 2_000  # opened after start
CREATED = 1_000  # by a CreateTopics: gc_freeze.BULK_PARTITIONS
OBJECTS_PER_LOG = 30  # each log opened holds about as many tracked objects (35 measured)


def _unfrozen() -> int:
    """The tracked objects a full collection would walk now."""
    return len(gc.get_objects())


async def test_logs_opened_after_start_and_topics_created_are_frozen(tmp_path: Path) -> None:
    data = tmp_path / "data"
    closed_wide_topic(data, "wide", PARTITIONS, int(time.time() * 1000))
    server = make_server(data)
    await server.start()
    try:
        deadline = time.monotonic() + 120
        while server.services.logs.loading:
            assert time.monotonic() < deadline, "the logs were not opened in time"
            await asyncio.sleep(0.05)
        # Unfrozen: PARTITIONS * OBJECTS_PER_LOG (60,000) and more.
        assert _unfrozen() < PARTITIONS * OBJECTS_PER_LOG / 3
        before = _unfrozen()
        async with Admin(f"127.0.0.1:{server.port}") as admin:
            await admin.create_topic("created", CREATED)
        assert _unfrozen() - before < CREATED * OBJECTS_PER_LOG / 3
    finally:
        await server.stop()
