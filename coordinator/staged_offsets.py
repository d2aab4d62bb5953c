"""Offsets a transaction commits for a group this process coordinates while the transaction's
coordinator is another process (`--processes N`, `send_offsets_to_transaction`).

As Kafka's group coordinator (`GroupMetadataManager.storeOffsets` with a producer id, then
`handleTxnCompletion`): a TxnOffsetCommit writes the offsets to this process's
`__consumer_offsets` log as a transactional batch of the producer, and they are staged, not
visible to OffsetFetch; the transaction's marker (WriteTxnMarkers from its coordinator) is
appended after them, and on COMMIT they become the group's committed offsets, on ABORT they
are dropped. A restart replays the same: batches of a producer are staged until its marker.
With N = 1 the transaction coordinator keeps such offsets in its own state and no
transactional batch is ever written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field

from protocol.consumer_offsets import OffsetValue

TopicPartition = tuple[str, int]
GroupOffsets = dict[str, dict[TopicPartition, OffsetValue]]


@dataclass(slots=True)
class _Open:
    epoch: int
    groups: GroupOffsets = field(default_factory=dict)


class StagedOffsets:
    """Producer id -> the offsets its open transaction staged, by group."""

    def __init__(self) -> None:
        self._open: dict[int, _Open] = {}

    def stage(
        self, producer_id: int, epoch: int, group: str, offsets: dict[TopicPartition, OffsetValue]
    ) -> None:
        entry = self._open.get(producer_id)
        if entry is None or entry.epoch < epoch:
            entry = self._open[producer_id] = _Open(epoch)
        entry.groups.setdefault(group, {}).update(offsets)

    def epoch(self, producer_id: int) -> int | None:
        """The epoch of the producer's open transaction here (None: none open)."""
        entry = self._open.get(producer_id)
        return entry.epoch if entry is not None else None

    def end(self, producer_id: int, epoch: int, commit: bool) -> GroupOffsets:
        """What a COMMIT marker of `epoch` commits of what the producer staged (forgotten here
        either way). Offsets staged under an older epoch belong to a transaction fenced since
        (its abort came first; a TxnOffsetCommit verified before it was written after it):
        never committed. Under TV1 a transaction commits under the epoch it wrote with."""
        entry = self._open.pop(producer_id, None)
        if entry is None or not commit or entry.epoch != epoch:
            return {}
        return entry.groups

    def open_transactions(self) -> list[tuple[int, int, GroupOffsets]]:
        """(producer id, epoch, offsets by group) of every transaction still open here."""
        return [(pid, e.epoch, e.groups) for pid, e in self._open.items()]

    def has_pending(self, group: str, partition: TopicPartition) -> bool:
        return any(partition in e.groups.get(group, ()) for e in self._open.values())

    def __len__(self) -> int:
        return len(self._open)
