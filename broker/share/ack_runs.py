"""Acknowledgement batches as a request carries them, cut into runs of one type each."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Sequence
from itertools import groupby

from broker.share.errors import ShareException
from broker.share.record_state import AcknowledgeType

_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_ACK_TYPE = {int(t): t for t in AcknowledgeType}

AckBatch = tuple[int, int, Sequence[int]]
"""(first offset, last offset, acknowledge types): one type for the range, or one per offset."""

Run = tuple[int, int, AcknowledgeType]
"""(first offset, last offset, type): offsets acknowledged alike, the unit a plan works in."""


class MalformedAcks(ShareException, ValueError):
    """Acknowledgement batches Kafka refuses whole, before looking at any record:
    INVALID_REQUEST."""


def ack_runs(batches: Iterable[AckBatch]) -> Iterator[Run]:
    """The request's batches cut into runs of one type each, checked as they are cut (a
    generator: a request of thousands of runs is cut a slice at a time).

    :raises MalformedAcks: first > last, unsorted or overlapping batches, an unknown type,
        or a types list that is neither one type nor one per offset.
    """
    prev_last: int | None = None
    for first, last, types in batches:
        if first > last or (prev_last is not None and first <= prev_last):
            raise MalformedAcks(f"batch {first}-{last} out of order")
        if not types or not _ACK_TYPES.issuperset(types):
            raise MalformedAcks(f"batch {first}-{last}: bad acknowledge types")
        if len(types) == 1:
            yield (first, last, _ACK_TYPE[types[0]])
        elif len(types) == last - first + 1:
            # One type per offset: equal neighbours become one run, handled as a range.
            offset = first
            for ack, group in groupby(types):
                n = sum(1 for _ in group)
                yield (offset, offset + n - 1, _ACK_TYPE[ack])
                offset += n
        else:
            raise MalformedAcks(f"batch {first}-{last}: {len(types)} acknowledge types")
        prev_last = last
