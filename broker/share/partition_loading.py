"""A share-partition brought into memory: recovered from the state its log records, or
started at `share.auto.offset.reset` (its starting point recorded first)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Protocol

import structlog

from broker.share.limits import limits_of
from broker.share.persister import Persister
from broker.share.persister import load
from broker.share.share_logs import ShareLogs
from broker.share.share_metrics import ShareMetrics
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from coordinator.group_configs import GroupConfigs
from storage.errors import KafkaStorageError
from storage.errors import StorageError

log = structlog.get_logger("shoal.share")


def open_partition(
    logs: ShareLogs,
    configs: GroupConfigs,
    persister: Persister,
    key: SharePartitionKey,
    now_ms: int,
    metrics: ShareMetrics,
) -> SharePartition | None:
    """The share-partition `key`, loaded; None if its topic or partition does not exist.

    :raises storage.errors.KafkaStorageError: a new one's starting point was not recorded.
    """
    group_id, topic_id, partition = key
    topic = logs.topic_by_id(topic_id)
    plog = logs.log(topic.name, partition) if topic else None
    if plog is None or topic is None:
        return None
    earliest = configs.effective(group_id, "share.auto.offset.reset") == "earliest"
    start = plog.log_start_offset if earliest else plog.log_end_offset
    limits = limits_of(configs, group_id)
    # The topic's own id object: keys made of it hit by identity (`UUID.__eq__` is Python).
    sp = SharePartition(group_id, topic.topic_id, partition, start_offset=start, limits=limits)
    started = time.perf_counter()  # a duration, not a point in time: not the clock's now
    if load(persister, sp, plog.log_start_offset, now_ms):
        # Control offsets in the recovered window are not data (a fetch would pass them):
        # passed now, so its open records and lag are right before anyone fetches.
        for first, last in plog.non_data_ranges(sp.spso, sp.speo):
            sp.pass_non_data(first, last)
    metrics.on_partition_loaded(time.perf_counter() - started)
    return sp


class Registry(Protocol):
    def partitions(self) -> Mapping[SharePartitionKey, SharePartition]: ...
    def get(
        self, group_id: str, topic_id: uuid.UUID, partition: int, now_ms: int
    ) -> SharePartition | None: ...


def load_recorded(
    registry: Registry, persister: Persister, logs: ShareLogs, now_ms: Callable[[], int]
) -> Iterator[None]:
    """Load every share-partition with recorded state, yielding between them (and between
    slices of a header walk its log may need): their lag is known from the start, before
    any member comes back. One that cannot be read is logged and left for its first fetch.
    Said in one line."""
    started, loaded = time.monotonic(), 0
    for group_id, topic_id, partition in persister.recorded():
        topic = logs.topic_by_id(topic_id)
        if topic is not None:
            yield from _opened(logs, topic.name, partition)
        plog = logs.log(topic.name, partition) if topic else None
        if (group_id, topic_id, partition) in registry.partitions() or plog is None:
            continue
        yield from plog.learn_non_data()
        try:
            registry.get(group_id, topic_id, partition, now_ms())
            loaded += 1
        except StorageError as e:
            log.warning("share-partition not loaded at start", group=group_id,
                        topic_id=str(topic_id), partition=partition, error=str(e))  # fmt: skip
        yield
    if loaded:
        log.info("share-partitions loaded", partitions=loaded,
                 seconds=round(time.monotonic() - started, 3))  # fmt: skip


def _opened(logs: ShareLogs, topic: str, partition: int) -> Iterator[None]:
    """The partition's log opened, a slice at a time if it is being recovered at the start
    (else `log` would check it in one go); one that cannot be opened is left to `log`."""
    with contextlib.suppress(KafkaStorageError):
        while not logs.open_slice(topic, partition):
            yield
