"""The timed duties of groups, share-partitions and transactions: lock expiry, dead-letter
copies, session timeouts, offsets retention, transaction timeouts and expiry.

`Server.start` runs each at its own interval; `Server.run_timers` runs them at once for a test
that moves its clock. Each is a method, so a failure is logged under its name.
"""

from __future__ import annotations

import asyncio

import structlog

from broker import transactions
from broker.context import BrokerServices
from broker.share.dead_letter_duty import DEAD_LETTER_BUDGET
from storage.errors import StorageError

log = structlog.get_logger("shoal.server")

LOCK_TIMER_TICK_MS = 50  # acquisition locks expire at most this late
DEAD_LETTER_TICK_MS = 100  # given-up records reach the dead-letter topic about this late
MEMBER_CHECK_MS = 250
CLASSIC_GROUP_TICK_MS = 100  # joins end, and sessions expire, at most this late


class GroupDuties:
    def __init__(self, services: BrokerServices) -> None:
        self.services = services

    def expire_members(self) -> None:
        """The coordinators' session (and rebalance) timeouts and the leave grace period."""
        s, now = self.services, self.services.now_ms()
        s.share_fetch.expire(s.coordinator.expire(now), now)
        s.consumer_groups.expire(now)

    def expire_offsets(self) -> None:
        """`offsets.retention.minutes` (read afresh: it may be changed while running)."""
        retention_ms = self.services.config.offsets_retention_minutes * 60_000
        try:
            expired = self.services.offsets.expire(self.services.now_ms(), retention_ms)
        except StorageError as e:  # tried again at the next check
            log.warning("expired committed offsets not deleted", error=str(e))
            return
        if expired:
            log.info("committed offsets expired", offsets=expired)

    async def transaction_timeouts(self) -> None:
        """Abort transactions open past their timeout; finish those a failed write left (their
        markers written in slices)."""
        await transactions.transaction_timeouts(self.services.transactions, self.services.now_ms())

    async def expire_transactional_ids(self) -> None:
        await transactions.expire_ids(self.services.transactions, self.services.now_ms())

    def expire_locks(self) -> None:
        self.services.share_partitions.expire_locks(self.services.now_ms())

    async def copy_dead_letters(self) -> None:
        """Passes of at most DEAD_LETTER_BUDGET records until the backlog is gone, letting
        requests run between them."""
        manager = self.services.share_partitions
        while manager.copy_dead_letters(self.services.now_ms()) >= DEAD_LETTER_BUDGET:
            await asyncio.sleep(0)

    def run_now(self) -> None:
        """Each duty once, as its tick would (one dead-letter pass only)."""
        self.expire_locks()
        self.services.share_partitions.copy_dead_letters(self.services.now_ms())
        self.expire_members()
        self.expire_offsets()
        transactions.transaction_timeouts_now(self.services.transactions, self.services.now_ms())
        self.services.classic_groups.tick()
