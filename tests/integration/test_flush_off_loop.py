"""A slow disk does not slow other clients: the periodic fsync runs in the flush thread, and
a group config's file is written in a thread before the answer.

`os.fsync` is wrapped to take 0.5 s (a fake of the OS call); the broker runs in the test's own
event loop, so a sync on the loop would hold the probe's round trips for as long.
"""

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
from tests.brokers import make_server
from tests.probe import Probe

# `latency`: measures how long other clients wait, so it runs alone (`make test`).
pytestmark = [pytest.mark.integration, pytest.mark.latency]
SLOW_FSYNC_S = 0.5


async def test_slow_fsync_does_not_delay_other_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server(tmp_path / "data", **{"log.flush.interval.ms": 50})
    await server.start()
    try:
        bootstrap = f"127.0.0.1:{server.port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic("slow-disk", 1)
        syncs, running, most = 0, 0, 0
        lock = threading.Lock()
        real: Callable[[int], None] = os.fsync

        def slow_fsync(fd: int) -> None:
            nonlocal syncs, running, most
            with lock:
                syncs, running = syncs + 1, running + 1
                most = max(most, running)
            time.sleep(SLOW_FSYNC_S)
            real(fd)
            with lock:
                running -= 1

        monkeypatch.setattr(os, "fsync", slow_fsync)
        async with Producer(bootstrap) as producer:
            with Probe(server.port) as probe:
                deadline = time.monotonic() + 3 * SLOW_FSYNC_S
                while time.monotonic() < deadline:
                    await producer.send("slow-disk", b"v", partition=0)
                    await asyncio.sleep(0.01)
        assert syncs >= 2 and most == 1  # flushes ran, one at a time
        assert probe.slowest < Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    finally:
        monkeypatch.undo()
        await server.stop()


async def test_a_group_config_is_written_off_the_loop_before_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IncrementalAlterConfigs of a group's configs: the file (tmp, fsync, rename, fsync of the
    directory) was written on the loop, holding every client for two fsyncs per request
    (DeleteGroups of a share group wrote it so too). The answer still comes once the file holds
    the change."""
    server = make_server(tmp_path / "data")
    await server.start()
    stored = server.config.data_dir / "share-group-configs.json"
    try:
        real: Callable[[int], None] = os.fsync

        def slow_fsync(fd: int) -> None:
            time.sleep(SLOW_FSYNC_S)
            real(fd)

        monkeypatch.setattr(os, "fsync", slow_fsync)
        async with Admin(f"127.0.0.1:{server.port}") as admin:
            with Probe(server.port) as probe:
                for value in ("earliest", "latest"):
                    await admin.incremental_alter_configs(
                        ConfigResourceType.GROUP, "slow-group", {"share.auto.offset.reset": value}
                    )
                    assert f'"share.auto.offset.reset": "{value}"' in stored.read_text()
        assert probe.slowest < Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    finally:
        monkeypatch.undo()
        await server.stop()
