"""The log start moves up (DeleteRecords, retention): every share-partition of the partition
archives its records below the new start, SPSO moves to it (KIP-932), and its window is
written as a new checkpoint at the log end, so the records recovery needs lie above the start.
Plan, write, apply, one share-partition at a time.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol

import structlog

from broker.share.bookkeeping import Bookkeeping
from broker.share.persister import Persister
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey

log = structlog.get_logger("shoal.share")


class Registry(Protocol):
    """What the moves need of the manager's registry."""

    def partitions(self) -> Mapping[SharePartitionKey, SharePartition]: ...
    def initialised(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool: ...
    def finish_acknowledgement(self, key: SharePartitionKey) -> None: ...
    def get(
        self, group_id: str, topic_id: uuid.UUID, partition: int, now_ms: int
    ) -> SharePartition | None: ...


class LogStartMoves:
    def __init__(self, registry: Registry, persister: Persister, book: Bookkeeping) -> None:
        self._registry = registry
        self._persister = persister
        self._book = book

    def move_log_start(
        self, topic_id: uuid.UUID, partition: int, log_start: int, now_ms: int
    ) -> int:
        """`move_start_of` for every share-partition of the partition (`share_partitions_on`),
        in one step; how many records were archived.

        :raises storage.errors.KafkaStorageError: a checkpoint was not written; that
            share-partition and those after it are unchanged (those before it stay moved).
        """
        keys = self.share_partitions_on(topic_id, partition)
        return sum(self.move_start_of(key, log_start, now_ms) for key in keys)

    def share_partitions_on(self, topic_id: uuid.UUID, partition: int) -> list[SharePartitionKey]:
        """The share-partitions of one partition: loaded, or with durable state."""
        keys = {k for k in self._registry.partitions() if k[1] == topic_id and k[2] == partition}
        for group_id in self._persister.groups():
            key = (group_id, topic_id, partition)
            if key not in keys and self._persister.has_state(key):
                keys.add(key)
        return sorted(keys)

    def move_start_of(self, key: SharePartitionKey, log_start: int, now_ms: int) -> int:
        """Before the partition's log start moves up to `log_start`: the share-partition (loaded,
        or recovered from its log first) archives its records below it, SPSO moves to it
        (KIP-932), and its window is written as a new checkpoint at the log end, so the records
        recovery needs lie above the new start. Plan, write, apply. How many records were
        archived; none if the share-partition was deleted meanwhile.

        :raises storage.errors.KafkaStorageError: the checkpoint was not written; nothing changed.
        """
        if not self._registry.initialised(*key):  # its offsets were deleted: do not start it again
            return 0
        self._registry.finish_acknowledgement(key)
        sp = self._registry.get(*key, now_ms)
        if sp is None:
            return 0
        plan = sp.plan_log_start(log_start)
        self._persister.checkpoint(key, plan.start_offset, plan.end_offset, plan.ranges, now_ms)
        sp.apply_log_start(plan)
        self._book.after(sp, now_ms)
        log.info(
            "share-partition checkpointed above a new log start",
            group=key[0], topic_id=str(key[1]), partition=key[2],
            log_start=log_start, spso=sp.spso, archived=plan.archived,
        )  # fmt: skip
        return plan.archived
