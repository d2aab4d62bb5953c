"""Why records went ARCHIVING (KIP-1191): REJECTed, or released at the delivery-count limit.

The reason is the header their dead-letter copies carry. It is not durable: after a restart it
is inferred from the delivery count (`dead_letter.dead_letters`), as Kafka infers it.
"""

from __future__ import annotations

from broker.share.window import StateRange


class GivenUp:
    """Disjoint offset ranges of the window that went ARCHIVING, each with its reason."""

    __slots__ = ("_runs",)

    def __init__(self) -> None:
        self._runs: list[tuple[int, int, bool]] = []  # (first, last, REJECTed?)

    def note(self, first: int, last: int, rejected: bool) -> None:
        self._runs.append((first, last, rejected))

    def reasons(self, run: StateRange) -> list[tuple[int, int, bool | None]]:
        """`run` cut by why its records were given up: (first, last, True) REJECTed, False
        released at the delivery-count limit, None not known (given up before a restart)."""
        out: list[tuple[int, int, bool | None]] = []
        cursor = run.first_offset
        for first, last, rejected in sorted(self._runs):
            lo, hi = max(first, cursor), min(last, run.last_offset)
            if lo > hi:
                continue
            if lo > cursor:
                out.append((cursor, lo - 1, None))
            out.append((lo, hi, rejected))
            cursor = hi + 1
        if cursor <= run.last_offset:
            out.append((cursor, run.last_offset, None))
        return out

    def prune(self, start: int, archiving: int) -> None:
        """Forget the ranges below the window's `start`, and all of them once no record is
        `archiving`: bounded by the window."""
        self._runs = [g for g in self._runs if archiving and g[1] >= start]

    def clear(self) -> None:
        self._runs.clear()
