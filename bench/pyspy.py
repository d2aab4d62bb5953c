"""`python -m bench --profile DIR --profiler py-spy`: sample the running broker with py-spy.

Unlike cProfile, the sampler is a separate process reading the broker's stacks (`--pid`,
`--nonblocking`: the broker is never paused), so the broker runs its ordinary code at close to
its ordinary speed. Each profiled interval writes `DIR/<name>.pyspy.txt`, py-spy's collapsed
stacks ("frame;frame;... count", idle samples left out, frames by function), and
`summary()` turns one into the top functions by self and by total share of the samples.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

RATE = 250  # samples/s


def command(pid: int, output: Path) -> list[str]:
    return [
        _binary(), "record", "--pid", str(pid), "--nonblocking", "--function",
        "--rate", str(RATE), "--format", "raw", "--output", str(output),
    ]  # fmt: skip


def _binary() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # the venv's, from the bench extra
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profiler py-spy needs py-spy (pip install -e '.[bench]')")
    return found


class Recorder:
    """One py-spy at a time on the broker, started and stopped around a measured interval."""

    def __init__(self, pid: int, directory: Path) -> None:
        self.pid = pid
        self.directory = directory
        self.proc: subprocess.Popen[bytes] | None = None
        self.partial = directory / "current.pyspy.txt"

    def start(self) -> None:
        self.stop(None)
        self.partial.unlink(missing_ok=True)
        log = open(self.directory / "py-spy.log", "ab")  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen(
            command(self.pid, self.partial), stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def stop(self, name: str | None) -> None:
        """Stop sampling (py-spy writes its file on SIGINT); keep it as `<name>.pyspy.txt`."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        if name is not None and self.partial.exists():
            self.partial.rename(self.directory / f"{name}.pyspy.txt")


def _frame(frame: str) -> str:
    """`handle (broker/handlers/produce.py:74)` with the path shortened to the last two parts."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")")
    return f"{name} ({'/'.join(path.split('/')[-2:])})" if path else name


def summary(path: Path, top: int = 25) -> str:
    """The functions with the most samples on top of the stack (self) and anywhere on it
    (total), as a Markdown table of both, with the sample count."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";")]
        samples += n
        own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    if not samples:
        return f"no samples in {path.name}\n"
    out = [f"{samples:,} samples at {RATE}/s (idle left out)", ""]
    for title, counts in (("self", own), ("total", total)):
        out += [f"| {title} % | function |", "|---:|---|"]
        out += [f"| {n / samples * 100:.1f} | `{f}` |" for f, n in counts.most_common(top)]
        out.append("")
    return "\n".join(out)
