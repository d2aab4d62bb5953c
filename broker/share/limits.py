"""A share group's effective limits, as the share core reads them at every operation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.share.acquire.not_before import NO_BACKOFF
from broker.share.acquire.not_before import Backoff
from coordinator.group_configs import BACKOFF_INITIAL
from coordinator.group_configs import BACKOFF_MAX
from coordinator.group_configs import BACKOFF_MULTIPLIER
from coordinator.group_configs import DLQ_TOPIC
from coordinator.group_configs import ISOLATION_LEVEL
from coordinator.group_configs import PER_KEY
from coordinator.group_configs import GroupConfigs


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The effective group limits, read afresh at every operation (group configs change)."""

    delivery_count_limit: int
    max_record_locks: int
    lock_duration_ms: int
    renew_enabled: bool
    # share.acquire.mode=record_limit (KIP-1206): a fetch acquires at most MaxRecords records,
    # and the acquired range may end inside a stored batch.
    record_limit: bool = False
    # share.key.ordering.enable: records of one key are never in flight at two members.
    key_ordering: bool = False
    # share.key.ordering.max.in.flight.per.key: at most this many records of a key in flight.
    per_key: int = 1
    # KIP-1191: the group names a dead-letter topic, so REJECT and the delivery-count limit
    # lead to ARCHIVING (copied, then ARCHIVED) rather than straight to ARCHIVED.
    dead_letter: bool = False
    # share.isolation.level=read_committed: a fetch acquires below the LSO only, and never a
    # record of an aborted transaction.
    read_committed: bool = False
    # share.release.backoff.*: how long a released record waits before it is acquired again.
    backoff: Backoff = NO_BACKOFF


def limits_of(configs: GroupConfigs, group_id: str) -> Callable[[], ShareLimits]:
    """The group's effective limits, recomputed only after a group config or a broker default
    or bound behind them changed."""
    cached: list[tuple[tuple[int, int], ShareLimits]] = []

    def limits() -> ShareLimits:
        version = (configs.version, configs.broker_version)
        if cached and cached[0][0] == version:
            return cached[0][1]
        value = ShareLimits(
            delivery_count_limit=configs.effective(group_id, "share.delivery.count.limit"),
            max_record_locks=configs.effective(group_id, "share.partition.max.record.locks"),
            lock_duration_ms=configs.effective(group_id, "share.record.lock.duration.ms"),
            renew_enabled=configs.effective(group_id, "share.renew.acknowledge.enable"),
            record_limit=configs.effective(group_id, "share.acquire.mode") == "record_limit",
            key_ordering=configs.effective(group_id, "share.key.ordering.enable"),
            per_key=configs.effective(group_id, PER_KEY),
            dead_letter=bool(configs.effective(group_id, DLQ_TOPIC)),
            read_committed=configs.effective(group_id, ISOLATION_LEVEL) == "read_committed",
            backoff=Backoff(
                configs.effective(group_id, BACKOFF_INITIAL),
                configs.effective(group_id, BACKOFF_MAX),
                configs.effective(group_id, BACKOFF_MULTIPLIER),
            ),
        )
        cached[:] = [(version, value)]
        return value

    return limits
