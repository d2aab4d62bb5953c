"""Stopping the broker while a share snapshot file is being written in its thread."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from client import Admin
from client import ConfigResourceType
from client import Producer
from client import ShareConsumer
from storage.share_state_store import snapshot_groups
from tests.brokers import make_server

pytestmark = pytest.mark.integration
SLOW_FSYNC_S = 0.5


async def test_stop_waits_for_the_snapshot_write_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop() writes lagging snapshot files itself; one already being written by the
    snapshot duty must finish first, or both writers race on the same temporary file."""
    server = make_server(tmp_path / "data")
    await server.start()
    bootstrap = f"127.0.0.1:{server.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("jobs", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "g", {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        await producer.send("jobs", b"v", partition=0)
    async with ShareConsumer(bootstrap, "g") as consumer:
        consumer.subscribe(["jobs"])
        for _ in range(50):  # the share-partition is made, and its first checkpoint written
            if await consumer.poll(0.1):
                break

    # The duty's thread stops in the middle of its write (before the rename) for 0.5 s, and
    # the first write stop() makes itself takes 1 s: without waiting, the duty renames the
    # shared .tmp away under stop()'s write, whose own rename then fails.
    in_snapshot_thread = threading.Event()
    stop_slowed = threading.Event()
    real: Callable[[int], None] = os.fsync

    def slow_fsync(fd: int) -> None:
        name = threading.current_thread().name
        if name.startswith(("shoal-snapshot", "asyncio")) and not in_snapshot_thread.is_set():
            in_snapshot_thread.set()
            time.sleep(SLOW_FSYNC_S)
        elif name == "MainThread" and in_snapshot_thread.is_set() and not stop_slowed.is_set():
            stop_slowed.set()
            time.sleep(2 * SLOW_FSYNC_S)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    try:
        assert await asyncio.to_thread(in_snapshot_thread.wait, 5.0)
        # Before the fix: FileNotFoundError renaming the snapshot's .tmp.
        await asyncio.wait_for(server.stop(), 20)
    finally:
        monkeypatch.undo()
    assert snapshot_groups(tmp_path / "data" / "__share_state") == {"g"}
