"""The Persister: durable share-partition state behind one interface (Kafka's share Persister).

Every share-state record is written through it: a new share-partition's first checkpoint, each
change before it is applied (two-phase), the window as it is once DeleteRecords moved the log
start, an admin reset and an admin delete. Kafka's Persister
has initialize, read, write and delete (and a read summary); so has this one, by
share-partition key. `ShareStatePersister` keeps the state as control records in the
partition's own log; `NoPersister` keeps none (`group.share.persister.class.name` empty).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.window import StateRange


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A share-partition's window as recorded, ready for `SharePartition.restore`."""

    start_offset: int
    end_offset: int
    ranges: tuple[StateRange, ...]


class Persister(Protocol):
    def initialise(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        """Record an empty window at `start_offset`: a new share-partition, or an admin reset
        (which applies it in memory only after this returns).

        :raises storage.errors.KafkaStorageError: nothing was recorded.
        """
        ...

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        """The recorded window (never starting below `log_start_offset`), or None if there is
        none. A record found damaged is stepped over, and the state read is written afresh so
        the next read does not meet the damage again."""
        ...

    def write(self, sp: SharePartition, changes: Sequence[StateRange], now_ms: int) -> int | None:
        """Make a planned change durable before it is applied (`Plan.changes`): the offset of
        the one-record control batch written, or None if nothing was written to the log.

        :raises storage.errors.KafkaStorageError: nothing was written; drop the plan.
        """
        ...

    def checkpoint(
        self,
        key: SharePartitionKey,
        start_offset: int,
        end_offset: int,
        ranges: Sequence[StateRange],
        now_ms: int,
    ) -> None:
        """Record the whole window as a new checkpoint at the log end: the log start moved
        (`SharePartition.plan_log_start`), and the records holding the share-partition's
        state must not lie below it.

        :raises storage.errors.KafkaStorageError: nothing was written; drop the plan.
        """
        ...

    def delete(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        """Forget the share-partition: a later `read` finds nothing or an empty window at
        `start_offset`, and `has_state` is false.

        :raises storage.errors.KafkaStorageError: nothing changed.
        """
        ...

    def has_state(self, key: SharePartitionKey) -> bool:
        """Whether the share-partition was initialised (Kafka's read summary), without a read."""
        ...

    def groups(self) -> frozenset[str]:
        """Groups with recorded state on some partition (they outlive their members)."""
        ...

    def recorded(self) -> list[SharePartitionKey]:
        """Every share-partition with recorded state (`has_state`), without a read."""
        ...

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        """A deleted topic takes its share state with it."""
        ...


class NoPersister:
    """Share state in memory only: nothing is written, nothing is found after a restart."""

    def initialise(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        pass

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        return None

    def write(self, sp: SharePartition, changes: Sequence[StateRange], now_ms: int) -> int | None:
        return None

    def checkpoint(
        self,
        key: SharePartitionKey,
        start_offset: int,
        end_offset: int,
        ranges: Sequence[StateRange],
        now_ms: int,
    ) -> None:
        pass

    def delete(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        pass

    def has_state(self, key: SharePartitionKey) -> bool:
        return False

    def groups(self) -> frozenset[str]:
        return frozenset()

    def recorded(self) -> list[SharePartitionKey]:
        return []

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        pass


def load(persister: Persister, sp: SharePartition, log_start_offset: int, now_ms: int) -> bool:
    """Restore a new `sp` from its recorded state, or record its starting point (its SPSO)
    when there is none; whether state was found.

    :raises storage.errors.KafkaStorageError: the starting point was not recorded.
    """
    state = persister.read(sp.key, log_start_offset, now_ms)
    if state is None:
        persister.initialise(sp.key, sp.spso, now_ms)
        return False
    sp.restore(state.start_offset, state.end_offset, state.ranges)
    sp.take_changes()
    return True
