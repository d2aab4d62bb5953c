"""Stopping the broker while a share snapshot file is being written, or a flush round runs,
in its thread, or a change runs to its end for a request whose connection is gone."""

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
from storage.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from storage.dir_checkpoints import read_recovery_points
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


async def test_stop_does_not_wait_for_the_flush_round_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop right after writes to every partition came while the flush duty was syncing
    them one after another (7 s over 5,000 partitions, issue 28) and waited for that whole
    round before the logs' own closes began, in parallel. Now the round starts no new sync
    once the stop begins; the closes sync what it left, and the data dir is marked clean."""
    partitions = 30
    server = make_server(tmp_path / "data", **{"log.flush.interval.ms": 500})
    await server.start()
    bootstrap = f"127.0.0.1:{server.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("wide", partitions)
    lock = threading.Lock()
    by_round = [0, 0]  # syncs the flush thread ran: in all, and after the stop began
    stopping = threading.Event()
    in_round = threading.Event()
    real: Callable[[int], None] = os.fsync

    def slow_fsync(fd: int) -> None:  # a slow disk for the flush thread: 0.1 s a sync
        if threading.current_thread().name.startswith("shoal-flush"):
            in_round.set()
            time.sleep(0.1)
            with lock:
                by_round[0] += 1
                by_round[1] += stopping.is_set()
        real(fd)

    async with Producer(bootstrap) as producer:
        monkeypatch.setattr(os, "fsync", slow_fsync)
        # At once: one round of the flush duty finds every partition dirty.
        await asyncio.gather(*(producer.send("wide", b"v", partition=p) for p in range(partitions)))
    try:
        assert await asyncio.to_thread(in_round.wait, 10.0)
        stopping.set()
        await asyncio.wait_for(server.stop(), 30)
    finally:
        monkeypatch.undo()
    assert by_round[1] <= 1, by_round  # the one under way; the round had up to 30 to go
    data = tmp_path / "data"
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    points = read_recovery_points(data)
    assert all(points[("wide", p)] == 1 for p in range(partitions)), points


async def test_stop_waits_for_a_change_running_to_its_end_within_its_timeout(
    tmp_path: Path,
) -> None:
    """A change a request began runs to its end when the request's connection is closed
    (`broker.to_the_end`), and stop() closes every connection: it waits for such changes
    before the logs close (one that took its time ends; before, stop() went on and the loop's
    end cut it), and no longer than what is left of `shutdown.timeout.ms` (one that never
    ends does not hold the stop)."""
    server = make_server(tmp_path / "data", **{"shutdown.timeout.ms": 3_000})
    await server.start()
    ended = asyncio.Event()

    async def slow_change() -> None:
        await asyncio.sleep(1.0)
        ended.set()

    async def endless_change() -> None:
        await asyncio.Event().wait()

    changes = server.services.changes
    slow = asyncio.ensure_future(changes.to_the_end(slow_change()))
    endless = asyncio.ensure_future(changes.to_the_end(endless_change()))
    await asyncio.sleep(0)  # begun
    slow.cancel()  # their requests are gone
    endless.cancel()
    started = time.monotonic()
    await asyncio.wait_for(server.stop(), 20)
    assert ended.is_set()
    assert time.monotonic() - started < 3.0 + 2.0  # the timeout, and some slack for the rest
