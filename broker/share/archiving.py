"""A share-partition's records given up on (KIP-1191): ARCHIVING until their copy to the group's
dead-letter topic is written (or cannot be), then ARCHIVED.

Which they are (from SPSO on, in offset order), why each was given up (REJECTed or released at
the delivery-count limit: `given_up.py`), and the end of ARCHIVING, planned then applied once
durable, as every change of the window is. The dead-letter duty (`dead_letter_duty.py`) drives
it through its `SharePartition`.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.share.given_up import GivenUp
from broker.share.in_flight import InFlightBatch
from broker.share.plans import archiving_runs
from broker.share.plans import plan_archive
from broker.share.record_state import RecordState
from broker.share.window import ShareWindow
from broker.share.window import StateRange

ARCHIVING = RecordState.ARCHIVING
ARCHIVED = RecordState.ARCHIVED


class Archiving:
    """The ARCHIVING records of one share-partition's window, and why they went there."""

    __slots__ = ("_given_up", "_window")

    def __init__(self, window: ShareWindow) -> None:
        self._window = window
        self._given_up = GivenUp()  # why records went ARCHIVING, in this run

    def note(self, first: int, last: int, rejected: bool) -> None:
        """[first, last] went ARCHIVING: REJECTed, or released at the limit."""
        self._given_up.note(first, last, rejected)

    def clear(self) -> None:
        self._given_up.clear()

    def count(self) -> int:
        """Records ARCHIVING: given up on, waiting for their copy to the dead-letter topic."""
        return self._window.archiving

    def runs(self, max_records: int) -> list[StateRange]:
        """The ARCHIVING ranges from SPSO on, in offset order, cut at about `max_records`."""
        return archiving_runs(self._window, max_records)

    def reasons(self, run: StateRange) -> list[tuple[int, int, bool | None]]:
        """`run` cut by why its records were given up: (first, last, True) REJECTed, False
        released at the delivery-count limit, None not known (given up before a restart)."""
        return self._given_up.reasons(run)

    def plan_end(self, runs: Sequence[StateRange]) -> list[StateRange]:
        """The durable change that ends ARCHIVING over `runs` (copied, or with no usable
        dead-letter topic): the parts still ARCHIVING, as ARCHIVED. Nothing changes yet."""
        return plan_archive(self._window, runs)

    def apply_end(self, changes: Sequence[StateRange]) -> int:
        """Apply a `plan_end` change once it is durable; how many records it archived."""
        window = self._window
        archived = 0
        for c in changes:
            archived += window.finish(c.first_offset, c.last_offset, _archived_if_archiving)
        window.advance_start()
        self._given_up.prune(window.start, window.archiving)
        return archived


def _archived_if_archiving(b: InFlightBatch) -> RecordState | None:
    return ARCHIVED if b.state is ARCHIVING else None
