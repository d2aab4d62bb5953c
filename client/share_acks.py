"""Acknowledgement types and how a partition's pending acknowledgements go on the wire."""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping


class AcknowledgeType(enum.IntEnum):
    """KIP-932 acknowledgement types, plus RENEW from KIP-1222 (ShareFetch/Acknowledge v2)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


AckBatch = tuple[int, int, list[int]]
# An offset, or an inclusive (first, last) range of offsets acknowledged alike.
AckKey = int | tuple[int, int]


def ack_batches(acks: Mapping[AckKey, AcknowledgeType]) -> list[AckBatch]:
    """(first_offset, last_offset, [type]) for each run of contiguous offsets of one type.

    One type per range is the compact form every broker version understands; offsets that are
    not contiguous, or change type, start a new batch. Range keys cost one step each, however
    many offsets they cover; where keys overlap, the later key in `acks` wins (expanded per
    offset, which only a caller mixing records and ranges of one partition pays for).
    """
    runs = sorted(
        (k, k, int(t)) if isinstance(k, int) else (k[0], k[1], int(t)) for k, t in acks.items()
    )
    if any(a[1] >= b[0] for a, b in itertools.pairwise(runs)):
        return _merged(_per_offset(acks))
    return _merged(runs)


def _per_offset(acks: Mapping[AckKey, AcknowledgeType]) -> list[tuple[int, int, int]]:
    flat: dict[int, int] = {}
    for k, t in acks.items():
        if isinstance(k, int):
            flat[k] = int(t)
        else:
            flat.update(dict.fromkeys(range(k[0], k[1] + 1), int(t)))
    return [(o, o, t) for o, t in sorted(flat.items())]


def _merged(runs: list[tuple[int, int, int]]) -> list[AckBatch]:
    out: list[AckBatch] = []
    for first, last, kind in runs:
        if out and out[-1][1] + 1 == first and out[-1][2] == [kind]:
            out[-1] = (out[-1][0], last, out[-1][2])
        else:
            out.append((first, last, [kind]))
    return out
