"""The Persister: durable share-partition state behind one interface (Kafka's share Persister).

Every share-state record is written through it: a new share-partition's first checkpoint, each
change before it is applied (two-phase), the window as it is once DeleteRecords moved the log
start, an admin reset and an admin delete. Kafka's Persister
has initialize, read, write and delete (and a read summary); so has this one, by
share-partition key, and takes plain data: keys, offsets and durable ranges, never a
SharePartition (`change_of` turns a plan's ranges into the `ShareChange` it writes).
`ShareStatePersister` keeps the state as control records in the partition's own log (over
`storage/share_state_log.py`, the log-format half); `NoPersister` keeps none
(`group.share.persister.class.name` empty).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from typing import Protocol

from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.window import StateRange
from protocol.share_state import StateBatch
from storage.share_state_store import overwrite


class ShareChange(NamedTuple):
    """A planned change as the Persister records it (`Plan.changes`, made durable before the
    plan is applied). `end_offset` is SPEO; `empties`: no record of the window stays open
    once it is applied; `after`: the window then, (SPSO, durable ranges), asked for only when
    a checkpoint of it is due (it costs O(window), a delta O(change)). A NamedTuple: one is
    made per write, and a frozen dataclass's __init__ costs several times as much."""

    ranges: tuple[StateRange, ...]
    end_offset: int
    empties: bool
    after: Callable[[], tuple[int, tuple[StateRange, ...]]]


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

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
        """Make a planned change durable before it is applied: the offset of the one-record
        control batch written, or None if nothing was written to the log.

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

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
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


def change_of(sp: SharePartition, ranges: Sequence[StateRange]) -> ShareChange:
    """The `ShareChange` that records `ranges`, a plan of `sp` not yet applied."""
    changes = tuple(ranges)
    return ShareChange(changes, sp.speo, empties(sp, changes), lambda: window_after(sp, changes))


def empties(sp: SharePartition, changes: Sequence[StateRange]) -> bool:
    """Whether applying `changes` leaves no record open in the window. A plan only changes
    records that are open now, so the window empties when its terminal changes cover them all."""
    terminal = 0
    for c in changes:  # one or two ranges, nearly always: a loop costs less than a generator
        if c.state.is_terminal:
            terminal += c.last_offset - c.first_offset + 1
    return terminal == sp.open_records()


def window_after(
    sp: SharePartition, changes: Sequence[StateRange]
) -> tuple[int, tuple[StateRange, ...]]:
    """SPSO and durable ranges of the window once `changes` are applied (for a checkpoint)."""
    states = overwrite(list(batches_of(sp.state_ranges())), batches_of(changes))
    merged: list[StateBatch] = []
    for b in states:
        p = merged[-1] if merged else None
        if (
            p
            and p.state == b.state
            and p.delivery_count == b.delivery_count
            and p.not_before == b.not_before
        ):
            merged[-1] = StateBatch(
                p.base_offset, b.last_offset, p.state, p.delivery_count, p.not_before
            )
        else:
            merged.append(b)
    k = 0
    while k < len(merged) and RecordState(merged[k].state).is_terminal:
        k += 1
    start = merged[k].base_offset if k < len(merged) else sp.speo
    return start, ranges_of(merged[k:])


def batches_of(ranges: Sequence[StateRange]) -> tuple[StateBatch, ...]:
    """Durable ranges in the share-state records' form."""
    return tuple(
        StateBatch(r.first_offset, r.last_offset, int(r.state), r.delivery_count, r.not_before)
        for r in ranges
    )


def ranges_of(batches: Sequence[StateBatch]) -> tuple[StateRange, ...]:
    """Share-state records' ranges as durable ranges."""
    return tuple(
        StateRange(
            b.base_offset, b.last_offset, RecordState(b.state), b.delivery_count, b.not_before
        )
        for b in batches
    )
