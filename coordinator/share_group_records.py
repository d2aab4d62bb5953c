"""The share groups a coordinator knows, recorded in its own `__consumer_offsets` (`--processes N`).

With N processes a share group's coordinator is node `crc32(group) % N`, but its
share-partitions' state lives with each partition's leader: after a restart the coordinator
would know a group only from the state of the partitions it leads itself, and a group whose
state is all on other nodes would be GROUP_ID_NOT_FOUND to the admin APIs until a member
joined. Kafka's coordinator knows every share group after a restart: it writes a
ShareGroupMetadata record to `__consumer_offsets` for each group and replays them at start
(`GroupCoordinatorShard.replay` -> `GroupMetadataManager.replay`: a value makes the group,
a tombstone removes it). So does this one, in its own offsets log (`__nodes/<id>/`: one
writer), with Kafka's schema (`protocol.share_group_metadata`): a record when the group is
first made here (a member's first heartbeat, or AlterShareGroupOffsets of a group that never
ran), a tombstone when DeleteGroups deletes it. Appended as an offset commit is (durable as an
acknowledged record: kill -9 loses nothing), replayed with the offsets (`OffsetStore`).

With N = 1 nothing is recorded: every share-partition is local, and the group is known from its
state as before.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable

import structlog

from protocol.record_batch import build_batch
from protocol.share_group_metadata import InvalidShareGroupRecord
from protocol.share_group_metadata import decode_key
from protocol.share_group_metadata import encode_key
from protocol.share_group_metadata import encode_value
from storage.log import PartitionLog

_log = structlog.get_logger("shoal.groups")

RECORD_ALL_BATCH = 1_000  # records per batch of `record_all` (~40 bytes each)


class ShareGroupRecords:
    def __init__(
        self, log: PartitionLog, now_ms: Callable[[], int],
        coordinates: Callable[[str], bool] | None,
    ) -> None:  # fmt: skip
        """`coordinates`: whether this process coordinates a group (None with N = 1: nothing
        is recorded). A record of a group another process coordinates (N changed) is left."""
        self._log = log
        self._now_ms = now_ms
        self._coordinates = coordinates
        self._groups: set[str] = set()
        self._frozen: frozenset[str] | None = frozenset()

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record of the offsets log that is not an offset (`OffsetStore` recovery)."""
        try:
            group_id = decode_key(key)
        except InvalidShareGroupRecord as e:
            _log.error("unreadable share group record stepped over", error=str(e))
            return
        if group_id is None or self._coordinates is None or not self._coordinates(group_id):
            return
        if value is None:
            self._groups.discard(group_id)
        else:
            self._groups.add(group_id)
        self._frozen = None

    def groups(self) -> frozenset[str]:
        if self._frozen is None:
            self._frozen = frozenset(self._groups)
        return self._frozen

    def record(self, group_id: str, epoch: int) -> None:
        """Record a group made here (nothing when it is recorded already, with N = 1, or for a
        group another process coordinates: a request sent to the wrong node).

        :raises storage.errors.StorageError: not written; it stays unrecorded.
        """
        mine = self._coordinates
        if mine is not None and group_id not in self._groups and mine(group_id):
            self._write(group_id, encode_value(epoch))

    def record_all(self, group_ids: Iterable[str]) -> int:
        """Record every group of `group_ids` this process coordinates and has not recorded,
        `RECORD_ALL_BATCH` to a batch, with one log line (a change of N: `broker.node_merge`
        writes every known share group at its new coordinator); how many.

        :raises storage.errors.StorageError: not all written.
        """
        mine = self._coordinates
        if mine is None:
            return 0
        todo = [g for g in dict.fromkeys(group_ids) if g not in self._groups and mine(g)]
        for i in range(0, len(todo), RECORD_ALL_BATCH):
            chunk = todo[i : i + RECORD_ALL_BATCH]
            now = self._now_ms()
            records = [(encode_key(g), encode_value(0)) for g in chunk]
            self._log.append(build_batch(records, timestamp_ms=now), now_ms=now, keyed=True)
            self._groups.update(chunk)
            self._frozen = None
        if todo:
            _log.info("share groups recorded", groups=len(todo))
        return len(todo)

    def forget(self, group_id: str) -> None:
        """A tombstone for a deleted group (nothing when it was never recorded).

        :raises storage.errors.StorageError: not written; it stays recorded.
        """
        if group_id in self._groups:
            self._write(group_id, None)

    def _write(self, group_id: str, value: bytes | None) -> None:
        now = self._now_ms()
        batch = build_batch([(encode_key(group_id), value)], timestamp_ms=now)
        self._log.append(batch, now_ms=now, keyed=True)
        if value is None:
            self._groups.discard(group_id)
        else:
            self._groups.add(group_id)
        self._frozen = None
        _log.info("share group recorded" if value else "share group record deleted",
                  group=group_id)  # fmt: skip


def known_share_groups(
    records: ShareGroupRecords, with_state: Callable[[], Collection[str]], *, single: bool
) -> Callable[[], Collection[str]]:
    """The share groups this coordinator knows besides those in memory: with N = 1 those with
    share state in the data dir, as before; with N > 1 the recorded ones. Not the groups with
    state: those files are the leaders' (a group coordinated by another node would be listed
    here too), and this process's view of them is read once and then follows only its own
    writes (a group another node deleted would stay known here)."""
    return with_state if single else records.groups
