"""The stream reader's batches of redelivered records (spark.redelivery, spark.acquire), over a
fake share group that hands out records as Shoal's broker does: per partition lowest offset
first, partitions in turn, a delivery count per record, archived when released at the limit.

Each run takes batches until one holds a poison record: that batch fails (the query stops, its
records go back) and a new reader starts, as Spark restarts a failed query. Issue 30: a good
record is never archived because a poison record shared its batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

pytest.importorskip("pyspark")  # spark.ranges is imported by the acquirer's module

from client.records import AcquiredData
from client.records import AcquiredRange
from spark.acquire import Taker
from spark.redelivery import Fronts
from spark.redelivery import batch_cap

TP = tuple[str, int]


class FakeGroup:
    """One member's view of a share group: available records per partition with their
    delivery counts (ShareConsumer's `assigned` and `poll_acquired`, record_limit mode)."""

    def __init__(self, partitions: int, records: int, delivery_limit: int) -> None:
        self.counts = {("t", p): dict.fromkeys(range(records), 0) for p in range(partitions)}
        self.held: dict[TP, dict[int, int]] = {tp: {} for tp in self.counts}
        self.done: set[tuple[TP, int]] = set()
        self.archived: set[tuple[TP, int]] = set()
        self.limit = delivery_limit
        self.max_records = 500
        self.rotation = 0
        self.polls = 0

    async def assigned(self, timeout_s: float = 1.0) -> set[TP]:
        return set(self.counts)

    async def poll_acquired(
        self, timeout_s: float = 1.0, *, only: Iterable[TP] | None = None
    ) -> list[AcquiredData]:
        self.polls += 1
        keys = sorted(self.counts if only is None else set(only))
        start = self.rotation % len(keys)
        self.rotation += 1
        left, out = self.max_records, []
        for tp in keys[start:] + keys[:start]:
            ranges: list[AcquiredRange] = []
            for offset in sorted(self.counts[tp]):
                if left == 0:
                    break
                count = self.counts[tp].pop(offset) + 1
                self.held[tp][offset] = count
                left -= 1
                if (
                    ranges
                    and ranges[-1].last_offset + 1 == offset
                    and (ranges[-1].delivery_count == count)
                ):
                    ranges[-1] = AcquiredRange(ranges[-1].first_offset, offset, count)
                else:
                    ranges.append(AcquiredRange(offset, offset, count))
            if ranges:
                out.append(AcquiredData(tp[0], tp[1], tuple(ranges), b""))
        return out

    async def commit_sync(self) -> dict[TP, int]:
        return {}  # settle() stands for the acknowledgements

    def settle(self, batch: list[AcquiredData], *, ok: bool) -> None:
        for a in batch:
            tp = (a.topic, a.partition)
            for r in a.ranges:
                for offset in range(r.first_offset, r.last_offset + 1):
                    count = self.held[tp].pop(offset)
                    if ok:
                        self.done.add((tp, offset))
                    elif count >= self.limit:
                        self.archived.add((tp, offset))
                    else:
                        self.counts[tp][offset] = count

    def empty(self) -> bool:
        return not any(self.counts.values())


def offsets(batch: list[AcquiredData]) -> set[tuple[TP, int]]:
    return {
        ((a.topic, a.partition), o)
        for a in batch
        for r in a.ranges
        for o in range(r.first_offset, r.last_offset + 1)
    }


def run_until_done(
    group: FakeGroup, poison: set[tuple[TP, int]], limit: int
) -> tuple[int, list[int]]:
    """Runs of a query until the group is empty: (restarts, sizes of the batches taken)."""
    restarts, sizes = 0, []
    taker = Taker(group, group.limit)  # type: ignore[arg-type]  # the fake speaks its part
    while not group.empty():
        batch = asyncio.run(taker.take(limit, 0.0))
        assert batch, "nothing taken while records were available"
        sizes.append(len(offsets(batch)))
        failed = bool(offsets(batch) & poison)
        group.settle(batch, ok=not failed)
        if failed:  # the query stops; Spark restarts it with a new reader
            restarts += 1
            taker = Taker(group, group.limit)  # type: ignore[arg-type]
        assert restarts < 100
    return restarts, sizes


def test_caps_shrink_to_one_before_the_last_attempt() -> None:
    assert [batch_cap(level, 1000, 5) for level in range(1, 6)] == [1000, 100, 10, 1, 1]
    assert [batch_cap(level, 100_000, 5) for level in range(1, 5)] == [100_000, 2154, 46, 1]
    assert [batch_cap(level, 1000, 3) for level in range(1, 4)] == [1000, 1, 1]
    assert [batch_cap(level, 1000, 2) for level in range(1, 3)] == [1000, 1]
    assert batch_cap(2, 1, 5) == 1


@pytest.mark.parametrize("delivery_limit", [2, 3, 5, 10])
@pytest.mark.parametrize("partitions", [1, 3])
def test_only_the_poison_record_reaches_the_delivery_limit(
    delivery_limit: int, partitions: int
) -> None:
    """200 records per partition, one poison record, 1,000 records per trigger."""
    group = FakeGroup(partitions, 200, delivery_limit)
    poison = {(("t", partitions - 1), 137)}
    restarts, _ = run_until_done(group, poison, 1000)
    assert group.archived == poison
    assert len(group.done) == partitions * 200 - 1
    assert restarts == delivery_limit  # one failure per attempt of the poison record


def test_two_poison_records_in_two_partitions_cost_no_good_record() -> None:
    group = FakeGroup(4, 300, 5)
    poison = {(("t", 0), 10), (("t", 2), 250)}
    run_until_done(group, poison, 1000)
    assert group.archived == poison
    assert len(group.done) == 4 * 300 - 2


def test_a_partition_of_redelivered_records_is_never_read_with_another() -> None:
    """Partition 0 holds 3 records on their second attempt, partition 1 (with the poison
    record) 40 on their fourth: a batch sized for partition 0's level must not fill up with
    partition 1's records."""
    group = FakeGroup(2, 40, 5)
    group.counts[("t", 0)] = dict.fromkeys(range(3), 1)
    group.counts[("t", 1)] = dict.fromkeys(range(40), 3)
    poison = {(("t", 1), 3)}
    run_until_done(group, poison, 1000)
    assert group.archived == poison


def test_without_failures_every_batch_is_full() -> None:
    """The first batches each probe a partition the reader has not seen yet, then fill from
    the partitions known clean; once all are, every batch takes from all of them."""
    group = FakeGroup(4, 2000, 5)
    restarts, sizes = run_until_done(group, set(), 1500)
    assert restarts == 0
    assert sizes[:-1] == [1500] * (len(sizes) - 1) and sum(sizes) == 8000


def test_a_released_partition_is_probed_before_it_is_read_with_others() -> None:
    fronts = Fronts()
    fronts.assigned({("t", 0), ("t", 1)})
    fronts.empty(("t", 0))
    fronts.took([AcquiredData("t", 1, (AcquiredRange(0, 9, 2), AcquiredRange(10, 20, 1)), b"")])
    assert fronts.unknown({("t", 0), ("t", 1)}) is None  # 1's last record was a first delivery
    fronts.released(("t", 1))
    assert fronts.unknown({("t", 0), ("t", 1)}) == ("t", 1)
    fronts.assigned({("t", 1)})  # 0 revoked: if it comes back, it is probed again
    assert fronts.clean == set()
