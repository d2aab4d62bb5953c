"""One micro-batch's records from the share group: exactly up to the trigger's limit (the
consumer acquires in KIP-1206's record_limit mode), redelivered records one partition at a time
and in shrinking batches (`spark.redelivery`). Runs on the stream reader's loop, under its lock.
"""

from __future__ import annotations

from client.records import AcquiredData
from client.share_consumer import ShareConsumer
from spark.ranges import count
from spark.redelivery import Fronts
from spark.redelivery import TopicPartition
from spark.redelivery import batch_cap
from spark.redelivery import highest

_PROBE_WAIT_S = 0.0  # a probe asks what is there now: the broker answers at once


class Taker:
    def __init__(self, consumer: ShareConsumer, delivery_limit: int) -> None:
        self.consumer = consumer
        self.delivery_limit = delivery_limit
        self.fronts = Fronts()

    async def take(self, limit: int, wait_s: float) -> list[AcquiredData]:
        """Up to `limit` records for one micro-batch, waiting up to `wait_s` for the first."""
        assigned = await self.consumer.assigned(wait_s)
        if not assigned:
            return []  # not joined yet, or nothing assigned to this member
        fronts = self.fronts
        fronts.assigned(assigned)
        if fronts.unknown(assigned) is not None:
            # A probe's ShareFetch names one partition: the last batch's acknowledgements of
            # the others go first, or their records would still fill the lock windows.
            await self.consumer.commit_sync()
        while (tp := fronts.unknown(assigned)) is not None:
            probe = await self._poll(1, _PROBE_WAIT_S, [tp])
            if not probe:
                fronts.empty(tp)
                continue
            level = highest(probe)
            if level > 1:  # redelivered: this partition alone, as many as its level allows
                cap = batch_cap(level, limit, self.delivery_limit)
                out = probe + await self._more(cap - 1, [tp], clean=False)
                fronts.took(out)
                return out
            fronts.took(probe)  # clean: the batch goes on with every clean partition
            return probe + await self._more(limit - 1, sorted(fronts.clean & assigned))
        first = await self._poll(limit, wait_s, None)
        fronts.took(first)
        if not first or highest(first) > 1:
            return first
        return first + await self._more(limit - count(first), None)

    async def _more(
        self, wanted: int, only: list[TopicPartition] | None, *, clean: bool = True
    ) -> list[AcquiredData]:
        """Up to `wanted` more records with polls that wait for nothing, until one brings none.
        From `clean` partitions a redelivered record is news (another member's, or an expired
        lock): the batch ends there and its partition is probed from the next batch on."""
        out: list[AcquiredData] = []
        got = 0
        while got < wanted:
            acquired = await self._poll(wanted - got, 0.0, only)
            if not acquired:
                break
            out.extend(acquired)
            got += count(acquired)
            if clean:
                self.fronts.took(acquired)
                if highest(acquired) > 1:
                    break
        return out

    async def _poll(
        self, wanted: int, wait_s: float, only: list[TopicPartition] | None
    ) -> list[AcquiredData]:
        self.consumer.max_records = wanted
        return await self.consumer.poll_acquired(wait_s, only=only)
