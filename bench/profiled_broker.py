"""The broker (`python -m broker`) under cProfile, switched on and off by the benchmark driver.

SIGUSR1 starts a fresh `cProfile.Profile`; SIGUSR2 stops it and writes
`$SHOAL_BENCH_PROFILE_DIR/<name>.prof`, the name read from `next-name` in that directory. The
broker is single-threaded (one asyncio loop), so profiling the main thread sees all of it.
`SHOAL_BENCH_PROFILE_CLOCK=cpu` times with the process CPU clock instead of wall time, so time
spent descheduled (2 cores shared with the clients) is not charged to whatever was running; it
costs more per call. Only for `python -m bench --profile DIR`; the broker's code is unchanged.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from broker.main import main

_DIR = Path(os.environ.get("SHOAL_BENCH_PROFILE_DIR", "."))
_current: list[cProfile.Profile] = []


def _start(signum: int, frame: FrameType | None) -> None:
    if _current:
        _current.pop().disable()
    cpu = os.environ.get("SHOAL_BENCH_PROFILE_CLOCK") == "cpu"
    profile = cProfile.Profile(time.process_time) if cpu else cProfile.Profile()
    _current.append(profile)
    profile.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    if not _current:
        return
    profile = _current.pop()
    profile.disable()
    name = (_DIR / "next-name").read_text().strip() or "profile"
    tmp = _DIR / f"{name}.prof.tmp"
    profile.dump_stats(str(tmp))
    tmp.rename(_DIR / f"{name}.prof")


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main())
