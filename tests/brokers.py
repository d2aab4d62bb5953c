"""Real brokers for tests: in the test's own event loop, or as a separate `shoal serve` process."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from broker.clock import Clock
from broker.config import BrokerConfig
from broker.server import Server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_server(data_dir: Path, clock: Clock | None = None, **overrides: object) -> Server:
    """A broker on an ephemeral port, not yet started (`await server.start()`)."""
    values: dict[str, object] = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "metrics.port": -1,
    }
    values.update(overrides)
    return Server(BrokerConfig.load(environ={}, overrides=values), clock)


class BrokerProcess:
    """`shoal serve` in a child process, as a user runs it."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        extra: list[str] | None = None,
        *,
        max_open_files: int | None = None,
    ) -> None:
        self.max_open_files = max_open_files  # the child's RLIMIT_NOFILE (ulimit -n)
        self.data_dir = data_dir
        self.port = port or free_port()
        self.extra = extra or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        cmd = [
            sys.executable, "-m", "broker.cli", "serve",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--metrics-port", "-1", "--log-json",
            *self.extra,
        ]  # fmt: skip
        limit = self.max_open_files

        def set_limit() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
            preexec_fn=set_limit if limit is not None else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"broker did not listen on {self.port}: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: a graceful stop."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._close_log()
        return code

    def kill(self) -> None:
        """kill -9: no chance to flush or close anything."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
