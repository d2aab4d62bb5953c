"""Micro-batches of redelivered records shrink, so a failing batch never costs its good records.

Why (issue 30): when `foreachBatch` fails, the query stops and its batch goes back to the group;
the restarted query gets the same records again with a higher delivery count. If they all came
back in one batch every time, one poison record would take every good record of its batch to
the group's delivery-count limit with it, and the broker would archive them all.

What the reader knows. Each acquired range carries its delivery count: the attempt it is on
(its *level*). The broker hands a member the lowest available offsets of a partition first, and
a member (one query) takes a partition's records in offset order, accepts or releases whole
batches of them, and so leaves each partition's counts non-increasing with the offset: the
first record it gets from a partition has the highest level there. So one record taken from a
partition alone (a *probe*, a poll of that partition only with MaxRecords 1) tells the level of
everything behind it, and a partition whose last record taken was on its first delivery
(level 1) holds only first deliveries behind it: it is *clean*.

The rule. A micro-batch that holds redelivered records holds records of one partition only, and
at most `batch_cap(level)` of them: the trigger's limit at level 1, shrinking geometrically to 1
at the last attempt but one (`share.delivery.count.limit` - 1). A batch that fails goes back
whole, one level up, and is taken again in smaller batches; the good records of a failing
batch pass in the smaller ones, and a poison record is alone from the last attempt but one on,
so only it reaches the limit. With the default limit of 5 and 1,000 records per trigger the
caps are 1,000, 100, 10, 1, 1: a failing batch of 1,000 costs 1 + ~10 + ~10 + ~10 extra
batches and 5 restarts of the query (one per attempt of the poison record).

Clean partitions are read together, as before; a partition the reader has not seen since it
started (every partition after a restart, a partition a rebalance gave it) is probed first, one
per batch until it shows clean, so nothing redelivered comes in bulk with other records.

What it does not cover: records released by another member of the group into a partition this
query reads too (more queries than partitions share partitions) or by lock expiry while it runs
arrive wherever the broker puts them; the reader notices them (a level above 1 in a clean
partition), stops filling that batch and probes the partition from the next trigger on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from client.records import AcquiredData

TopicPartition = tuple[str, int]


def batch_cap(level: int, limit: int, delivery_limit: int) -> int:
    """The most records a micro-batch may hold when its highest delivery attempt is `level`:
    `limit` at 1, then geometrically fewer, 1 from `delivery_limit` - 1 on (always 1 when the
    limit is 2: the second attempt is the last)."""
    if level <= 1:
        return limit
    last_shared = delivery_limit - 2  # the highest level still shared with other records
    if level > last_shared:
        return 1
    shrunk = round(math.pow(limit, (last_shared + 1 - level) / last_shared))
    return max(1, min(limit, shrunk))


def levels(acquired: Iterable[AcquiredData]) -> dict[TopicPartition, tuple[int, int]]:
    """(first, last) delivery attempt of each partition's records, in offset order."""
    out: dict[TopicPartition, tuple[int, int]] = {}
    for a in acquired:
        if not a.ranges:
            continue
        first = min(a.ranges, key=lambda r: r.first_offset).delivery_count
        last = max(a.ranges, key=lambda r: r.last_offset).delivery_count
        tp = (a.topic, a.partition)
        out[tp] = (out[tp][0], last) if tp in out else (first, last)
    return out


def highest(acquired: Iterable[AcquiredData]) -> int:
    """The highest delivery attempt among the ranges (0 when there are none)."""
    return max((r.delivery_count for a in acquired for r in a.ranges), default=0)


class Fronts:
    """Which assigned partitions are clean: their next records are first deliveries."""

    def __init__(self) -> None:
        self.clean: set[TopicPartition] = set()
        self.seen: set[TopicPartition] = set()  # the assignment last seen

    def assigned(self, partitions: set[TopicPartition]) -> None:
        """Forget partitions no longer assigned: if they come back, another member may have
        left records there."""
        self.seen = set(partitions)
        self.clean &= partitions

    def unknown(self, partitions: set[TopicPartition]) -> TopicPartition | None:
        """The next partition to probe, if any is not known clean."""
        rest = partitions - self.clean
        return min(rest) if rest else None

    def empty(self, tp: TopicPartition) -> None:
        """A probe found nothing available there: what comes later is new (first deliveries)."""
        self.clean.add(tp)

    def took(self, acquired: Iterable[AcquiredData]) -> None:
        """Records were taken: a partition whose last one was a first delivery is clean, one
        whose last was redelivered may hold more behind it."""
        for tp, (_, last) in levels(acquired).items():
            if last <= 1:
                self.clean.add(tp)
            else:
                self.clean.discard(tp)

    def released(self, tp: TopicPartition) -> None:
        """Records of `tp` went back to the group (shoal_ack's release): they come first."""
        self.clean.discard(tp)
