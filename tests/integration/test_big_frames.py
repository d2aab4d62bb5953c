"""Frames near `socket.request.max.bytes` (100 MiB): absorbed in linear time while other clients
are served, and their memory given back once the connection closes.

A 100 MiB frame arrives in hundreds of reads. Buffering it by copying everything buffered so
far on every read cost one connection's 99 MB 30 s of the loop (probe p50 6.6 s), and 30 such
connections left the broker at 818 MB after they closed.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from protocol.framing import SIZE
from tests.brokers import BrokerProcess
from tests.probe import Probe

# `latency`: measures how long other clients wait, so it runs alone (`make test`).
pytestmark = [pytest.mark.integration, pytest.mark.latency]

CONNECTIONS = 3
SENT = DEFAULT_MAX_FRAME_BYTES - 1024 * 1024  # all but the last MiB of a declared 100 MiB frame
CHUNK = 1024 * 1024


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _wait_for(condition: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_nearly_whole_big_frames_are_absorbed_without_stalling_others_and_freed_on_close(
    broker_process: BrokerProcess,
) -> None:
    pid = broker_process.pid
    baseline_rss = _rss_bytes(pid)
    chunk = bytes(CHUNK)
    senders = [
        socket.create_connection(("127.0.0.1", broker_process.port), timeout=30)
        for _ in range(CONNECTIONS)
    ]
    try:
        with Probe(broker_process.port) as probe:
            for sock in senders:
                sock.sendall(SIZE.pack(DEFAULT_MAX_FRAME_BYTES))
                for _ in range(SENT // CHUNK):
                    sock.sendall(chunk)
            # Everything sent has been read: the broker holds each connection's bytes.
            held = CONNECTIONS * SENT
            assert _wait_for(lambda: _rss_bytes(pid) >= baseline_rss + held * 0.9, 30)
        assert probe.slowest < Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    finally:
        for sock in senders:
            sock.close()
    # Given back once the connections are gone (not kept by the allocator or the connections).
    assert _wait_for(lambda: _rss_bytes(pid) < baseline_rss + 64 * 1024 * 1024, 10), (
        f"RSS {_rss_bytes(pid) >> 20} MiB after close, {baseline_rss >> 20} MiB before"
    )
