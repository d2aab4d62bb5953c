"""The broker under test: `shoal serve` in a child process, and its CPU time from /proc."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (its threads included), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    # The command name (field 2) may hold spaces: split after its closing parenthesis.
    fields = stat[stat.rindex(b")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / CLK_TCK


class Broker:
    """`python -m broker ...` (the options of `shoal serve`), or `bench.profiled_broker`."""

    def __init__(
        self, data_dir: Path, *, profile_dir: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.data_dir = data_dir
        self.env = env or {}
        self.port = free_port()
        self.profile_dir = profile_dir
        self.log_path = data_dir.parent / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        module = "bench.profiled_broker" if self.profile_dir else "broker"
        return [
            sys.executable, "-m", module,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--metrics-port", "-1",
            "--log-level", "warning",
        ]  # fmt: skip

    def start(self, timeout: float = 30.0) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - open for the child's lifetime
        env = {**os.environ, **self.env}
        if self.profile_dir is not None:
            env["SHOAL_BENCH_PROFILE_DIR"] = str(self.profile_dir)
        self.proc = subprocess.Popen(
            self.command, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"broker did not listen on {self.port}:\n{self.log()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def profile_start(self) -> None:
        if self.profile_dir is not None:
            os.kill(self.pid, signal.SIGUSR1)

    def profile_stop(self, name: str) -> None:
        """Stop profiling and write `<profile_dir>/<name>.prof`."""
        if self.profile_dir is None:
            return
        (self.profile_dir / "next-name").write_text(name)
        target = self.profile_dir / f"{name}.prof"
        target.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        (self.profile_dir / "next-name").unlink(missing_ok=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
        return self.proc.returncode
