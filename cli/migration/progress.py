"""A progress bar on stderr for the record copy: records, bytes, rate and ETA.

At a terminal it redraws one line at most every 0.2 s; otherwise (a log, a CI job) it writes a
line every 5 s. The total is the source's offset span, an upper bound (control records and
compacted gaps take offsets too), so the ETA errs long.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total_records: int, out: TextIO | None = None) -> None:
        self.total = total_records
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self._interval = 0.2 if self.tty else 5.0
        self._start = time.monotonic()
        self._last = 0.0
        self.records = 0
        self.bytes = 0

    def update(self, records: int, nbytes: int, *, final: bool = False) -> None:
        self.records, self.bytes = records, nbytes
        now = time.monotonic()
        if not final and now - self._last < self._interval:
            return
        self._last = now
        end = "\n" if final or not self.tty else ""
        prefix = "\r" if self.tty else ""
        print(prefix + self.line(now), end=end, file=self.out, flush=True)

    def line(self, now: float) -> str:
        elapsed = max(now - self._start, 1e-6)
        rate = self.records / elapsed
        share = min(self.records / self.total, 1.0) if self.total else 1.0
        filled = int(share * 30)
        eta = (self.total - self.records) / rate if rate > 0 and self.total > self.records else 0
        return (
            f"[{'#' * filled}{'.' * (30 - filled)}] {self.records:,}/{self.total:,} records "
            f"{self.bytes / 1e6:,.1f} MB {rate:,.0f} rec/s {self.bytes / 1e6 / elapsed:,.1f} MB/s "
            f"ETA {eta:,.0f} s"
        )
