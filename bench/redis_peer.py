"""Redis Streams as the benchmark's peer: a `redis-server` child on a free port.

Started as a user would run it for a durable queue: append-only file on, fsync every second
(`appendonly yes`, `appendfsync everysec`), no RDB snapshots, in a temporary directory. Its
CPU time is read from /proc as the broker's is. If the server binary or the client library
(redis-py, the `bench` extra) is missing, `missing()` says how to get it and the phases run
Shoal's side alone.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

from bench.broker import free_port
from bench.broker import process_cpu_seconds

SERVER = "redis-server"


def missing() -> str | None:
    """Why the Redis peer cannot run here, or None if it can."""
    if shutil.which(SERVER) is None:
        return "redis-server not found (apt-get install redis-server)"
    try:
        import redis  # noqa: F401 - only checking it is there
    except ImportError:
        return "redis-py not installed (pip install -e '.[bench]')"
    return None


class RedisServer:
    """`redis-server` in a child process of ours, data in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def command(self) -> list[str]:
        return [
            SERVER, "--bind", "127.0.0.1", "--port", str(self.port),
            "--dir", str(self.directory), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", "--protected-mode", "no", "--daemonize", "no",
        ]  # fmt: skip

    def start(self, timeout: float = 20.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"redis-server did not answer on {self.port}")

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
