"""The source -> target offset map of one partition, kept durably while records are copied.

The target assigns its own offsets: control records (share state, transaction markers) and
compacted-away records leave gaps in the source that the target does not have. The map is kept
as runs `(source offset, target offset, count)` over which both sides advance by one, so a
partition copied without gaps is one run, and is appended to a file per partition
(`<state dir>/offsets/<topic>-<partition>.map`, one `src tgt count` line per run, fsynced at
each checkpoint). A torn last line (a crash while appending) is ignored: the records it
described are found again on the target at `--resume` (see `records.reconcile`).

Translation: a group position C on the source (the next offset it would read) becomes the
target offset of the first copied record at or after C, or the target's next offset when
every copied record lies below C.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from pathlib import Path


class OffsetMap:
    """Runs of (source, target) offsets, in increasing order on both sides."""

    def __init__(self) -> None:
        self._src: list[int] = []  # first source offset of each run
        self._tgt: list[int] = []
        self._count: list[int] = []

    def __len__(self) -> int:
        return sum(self._count)

    @property
    def runs(self) -> list[tuple[int, int, int]]:
        return list(zip(self._src, self._tgt, self._count, strict=True))

    @property
    def next_source(self) -> int | None:
        """The source offset after the last copied record (None: nothing copied)."""
        return self._src[-1] + self._count[-1] if self._src else None

    @property
    def next_target(self) -> int | None:
        return self._tgt[-1] + self._count[-1] if self._tgt else None

    def add_run(self, src: int, tgt: int, count: int) -> None:
        """Append a run; it must lie above every run already held, on both sides."""
        if count <= 0:
            return
        nxt_src, nxt_tgt = self.next_source, self.next_target
        if nxt_src is not None and nxt_tgt is not None:
            if src < nxt_src or tgt < nxt_tgt:
                raise ValueError(f"run ({src}, {tgt}) goes back below ({nxt_src}, {nxt_tgt})")
            if src == nxt_src and tgt == nxt_tgt:
                self._count[-1] += count
                return
        self._src.append(src)
        self._tgt.append(tgt)
        self._count.append(count)

    def add_pairs(self, pairs: Iterable[tuple[int, int]]) -> None:
        for src, tgt in pairs:
            self.add_run(src, tgt, 1)

    def translate(self, source_offset: int) -> int | None:
        """The target position of a source position (None: nothing was copied)."""
        if not self._src:
            return None
        i = bisect.bisect_right(self._src, source_offset) - 1
        if i < 0:
            return self._tgt[0]  # below the first copied record: start at the first
        if source_offset < self._src[i] + self._count[i]:
            return self._tgt[i] + source_offset - self._src[i]
        # in the gap after run i: the next run's first record, or the end
        return self._tgt[i + 1] if i + 1 < len(self._src) else self._tgt[i] + self._count[i]

    def copied_from(self, source_offset: int) -> int:
        """How many copied records have a source offset at or above `source_offset`."""
        total = 0
        for src, _, count in reversed(self.runs):
            if src >= source_offset:
                total += count
            else:
                total += max(0, src + count - source_offset)
                break
        return total


class MapFile:
    """One partition's map on disk: loaded whole, appended to at each checkpoint."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.map = OffsetMap()
        self._written = 0  # runs already on disk (the last one may still grow in memory)
        self._written_tail = (0, 0, 0)
        if path.exists():
            self._load()

    def _load(self) -> None:
        text = self.path.read_text()
        lines = text.split("\n")
        if not text.endswith("\n"):
            # a torn last line: cut it (the next append starts a line); its records are
            # found again on the target at --resume
            lines = lines[:-1]
            with self.path.open("r+") as f:
                f.truncate(len(text.encode()) - len(text.rpartition("\n")[2].encode()))
        for line in lines:
            if line.strip():
                src, tgt, count = (int(x) for x in line.split())
                self.map.add_run(src, tgt, count)
        self._mark_written()

    def _mark_written(self) -> None:
        runs = self.map.runs
        self._written = len(runs)
        self._written_tail = runs[-1] if runs else (0, 0, 0)

    def checkpoint(self) -> None:
        """Append what was mapped since the last checkpoint, and fsync it."""
        runs = self.map.runs
        if not runs:
            return
        new: list[tuple[int, int, int]] = []
        if self._written:
            src, tgt, count = runs[self._written - 1]
            grown = count - self._written_tail[2]
            if grown > 0:  # the last run written grew: its continuation is a run of its own
                new.append((src + self._written_tail[2], tgt + self._written_tail[2], grown))
        new.extend(runs[self._written :])
        if not new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write("".join(f"{s} {t} {c}\n" for s, t, c in new))
            f.flush()
            os.fsync(f.fileno())
        self._mark_written()
