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
    # Two int compares of closure cells, no tuple built: the share core calls this ~12 times
    # a steady-rate ShareFetch (~20 -> ~10 opcodes a call, bench/PROFILE.md "acquisition").
    version, broker_version = configs.version, configs.broker_version
    value = _limits(configs, group_id)

    def limits() -> ShareLimits:
        nonlocal version, broker_version, value
        if configs.version == version and configs.broker_version == broker_version:
            return value
        version, broker_version = configs.version, configs.broker_version
        value = _limits(configs, group_id)
        return value

    return limits


def _limits(configs: GroupConfigs, group_id: str) -> ShareLimits:
    return ShareLimits(
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


class GroupLimits:
    """Each group's `limits_of`, for the reads per fetch that name a group rather than a
    share-partition (lock duration, key ordering): two `GroupConfigs.effective` a ShareFetch
    (~250 opcodes) become two cached reads. A cache only: cleared whole when full."""

    MAX_GROUPS = 10_000

    def __init__(self, configs: GroupConfigs) -> None:
        self._configs = configs
        self._by_group: dict[str, Callable[[], ShareLimits]] = {}

    def __call__(self, group_id: str) -> ShareLimits:
        of = self._by_group.get(group_id)
        if of is None:
            if len(self._by_group) >= self.MAX_GROUPS:
                self._by_group.clear()
            of = self._by_group[group_id] = limits_of(self._configs, group_id)
        return of()
