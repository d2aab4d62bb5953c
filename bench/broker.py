"""A real broker in a child process, for the benchmark and the tests alike.

`BrokerProcess` runs `python -m broker --host 127.0.0.1 --port P --data-dir D ...` (the
options of `shoal serve`), logs JSON lines to a file beside the data directory, and waits until
the port accepts connections. The benchmark reads the child's CPU time from /proc and can run it
under cProfile (`bench.profiled_broker`); tests can cap its open files (`ulimit -n`), stop it
gracefully (SIGTERM) or kill it (-9), and restart it on the same port and data.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from bench import pyspy

CLK_TCK = os.sysconf("SC_CLK_TCK")
PROFILED = "bench.profiled_broker"  # `python -m broker` under cProfile, driven by signals


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int, avoid: frozenset[int] = frozenset()) -> int:
    """The first of `count` consecutive local ports, each free now and none in `avoid`:
    `--processes N` listens on port + i for node i, so all N must be free, not only the
    first (a taken port + 1 left node 1 restarting forever and a test waiting on it)."""
    while True:
        first = free_port()
        ports = range(first, first + count)
        if avoid.isdisjoint(ports) and all(_bindable(port) for port in ports[1:]):
            return first


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (its threads included), from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    # The command name (field 2) may hold spaces: split after its closing parenthesis.
    fields = stat[stat.rindex(b")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / CLK_TCK


def _nofile_limit(limit: int) -> Callable[[], None]:
    def set_limit() -> None:  # runs in the child, between fork and exec
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return set_limit


def listens(port: int) -> bool:
    """Whether something accepts connections on the local `port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class BrokerProcess:
    """The broker as a user runs it, in a child process of ours."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        extra: list[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        log_level: str = "info",
        max_open_files: int | None = None,
        profile_dir: Path | None = None,
        profiler: str = "cprofile",
        metrics_port: int = -1,
    ) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.extra = extra or []  # more `serve` options, e.g. ["--config", path]
        self.env = env or {}  # on top of our own environment
        self.log_level = log_level  # the benchmark runs at "warning": logging costs CPU
        self.max_open_files = max_open_files  # the child's RLIMIT_NOFILE (ulimit -n)
        self.profile_dir = profile_dir  # profile, writing <profile_dir>/<name>.prof ...
        self.profiler = profiler  # ... under cProfile, or <name>.pyspy.txt sampled by py-spy
        self.metrics_port = metrics_port  # -1: no metrics endpoint (`requests_handled`: None)
        self._sampler: pyspy.Recorder | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        profiled = self.profile_dir is not None and self.profiler == "cprofile"
        module = PROFILED if profiled else "broker"
        return [
            sys.executable, "-m", module,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--metrics-port", str(self.metrics_port),
            "--log-json", "--log-level", self.log_level, *self.extra,
        ]  # fmt: skip

    def requests_handled(self, api: str) -> float | None:
        """Requests of `api` (its name, e.g. "ShareFetch") the broker has handled, read from
        its metrics endpoint; None without one, or if it does not answer."""
        if self.metrics_port < 0:
            return None
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return None
        series = f'kafka_network_requestmetrics_requests_total{{request="{api}"}} '
        for line in text.splitlines():
            if line.startswith(series):
                return float(line[len(series) :])
        return 0.0

    def start(self, timeout: float = 90.0) -> None:
        """Start the child and wait until it listens; raise with its last log lines if not,
        the child killed (a broker that never listened would outlive the test and its log
        file would leak). A healthy broker listens in about a second; on a loaded 2-core CI
        machine its imports alone took 9-30 s, hence the long limit (one that crashes is
        seen at once by `poll`)."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        env = {**os.environ, **self.env}
        if self.profile_dir is not None:
            env["SHOAL_BENCH_PROFILE_DIR"] = str(self.profile_dir)
        limit = self.max_open_files
        self.proc = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_nofile_limit(limit) if limit is not None else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._close_log()
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            if listens(self.port):
                return
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"broker did not listen on {self.port} in {timeout} s:\n{self.log()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def profile_start(self) -> None:
        if self.profile_dir is None:
            return
        if self.profiler == "py-spy":
            self._sampler = self._sampler or pyspy.Recorder(self.pid, self.profile_dir)
            self._sampler.start()
        else:
            os.kill(self.pid, signal.SIGUSR1)

    def profile_stop(self, name: str) -> None:
        """Stop profiling and write `<profile_dir>/<name>.prof` (or `.pyspy.txt`)."""
        if self.profile_dir is None:
            return
        if self._sampler is not None:
            self._sampler.stop(name)
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
        """The end of the child's log (stdout and stderr)."""
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait: a graceful stop. Its exit code; -9 if it had to be killed after
        `timeout`, None if it was never started."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_log()
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9: no chance to flush or close anything."""
        assert self.proc is not None, "not started"
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
