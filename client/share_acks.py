"""Acknowledgement types and how a partition's pending acknowledgements go on the wire."""

from __future__ import annotations

import enum
from collections.abc import Mapping


class AcknowledgeType(enum.IntEnum):
    """KIP-932 acknowledgement types, plus RENEW from KIP-1222 (ShareFetch/Acknowledge v2)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


AckBatch = tuple[int, int, list[int]]


def ack_batches(acks: Mapping[int, AcknowledgeType]) -> list[AckBatch]:
    """(first_offset, last_offset, [type]) for each run of contiguous offsets of one type.

    One type per range is the compact form every broker version understands; offsets that are
    not contiguous, or change type, start a new batch.
    """
    out: list[AckBatch] = []
    first = last = -2
    current: int | None = None
    for offset in sorted(acks):
        kind = int(acks[offset])
        if offset == last + 1 and kind == current:
            last = offset
            continue
        if current is not None:
            out.append((first, last, [current]))
        first = last = offset
        current = kind
    if current is not None:
        out.append((first, last, [current]))
    return out
