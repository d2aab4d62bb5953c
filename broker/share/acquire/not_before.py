""" "Not before time T": records that wait in the window before they may be acquired again.

Retry backoff (issue 35, group configs `share.release.backoff.*`): a record RELEASEd, or whose
acquisition lock expired, becomes acquirable again only after

    min(max.ms, initial.ms * multiplier ^ (deliveryCount - 1))

milliseconds (RabbitMQ's delayed retry, NATS's BackOff, Pulsar's negative-ack backoff). The
wait is a time on the window's AVAILABLE range (`ShareWindow.finish(..., wait_of)`), kept per
range as lock deadlines are, so every policy skips it at the cost of one comparison per range:
`ShareWindow.acquire(..., now_ms)` and `first_available(now_ms)`; the rest of the partition
flows past. It is written with the release, in the SHARE_DELTA (or checkpoint) that records
it (`StateRange.not_before`, value version 1 of `protocol.share_state`), so a restart
delivers none early. A fetch parked meanwhile is woken when the earliest wait ends
(`Bookkeeping`'s wake-up timer), not by polling.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """A group's retry backoff (`initial_ms` 0: off)."""

    initial_ms: int = 0
    max_ms: int = 60_000
    multiplier: float = 2.0

    def delay_ms(self, delivery_count: int) -> int:
        """How long a record released after its `delivery_count`-th delivery waits."""
        if self.initial_ms <= 0 or self.max_ms <= 0:
            return 0
        try:
            delay = self.initial_ms * self.multiplier ** max(delivery_count - 1, 0)
        except OverflowError:
            return self.max_ms
        return int(min(self.max_ms, delay))

    def not_before(self, delivery_count: int, now_ms: int) -> int:
        """The time before which such a record is not acquired again (0: no wait)."""
        delay = self.delay_ms(delivery_count)
        return now_ms + delay if delay > 0 else 0


NO_BACKOFF = Backoff()
