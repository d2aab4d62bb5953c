"""Share-group acknowledgements staged in a transaction (Shoal's TxnShareAcknowledge, after
KIP-1289's draft: `SharePartition.stageTxnAcknowledge` and `applyTxnMarker` in
apache/kafka#22357).

Staging moves a member's ACQUIRED records to the transaction (TX_PENDING): they stay ACQUIRED,
owned by `owner_of(producer_id)` instead of the member, with no lock deadline, so neither lock
expiry nor the member's departure releases them; the member can no longer acknowledge them.
What was asked (the acknowledgement batches) is remembered here, per producer id, by the
partition the records live on. The transaction's marker for that partition then applies them:
COMMIT as the acknowledgement asked (ACCEPT -> ACKNOWLEDGED, written as a SHARE_DELTA before the
COMMIT marker), ABORT as a RELEASE (AVAILABLE, delivery count kept; ARCHIVED at the limit). The
transaction's timeout, a fencing InitProducerId and EndTxn abort all end it that way.

Staged acknowledgements are kept in memory only: acquisition is never durable, so after a
restart the records are AVAILABLE, and a transaction that staged any cannot commit what it
promised. The share-partitions' participation is durable (the `SHARE_ACKS_PARTITION`
participant in the transaction log), and the broker aborts such transactions when it starts
(`TransactionCoordinator.abort_open_with`). Not covered: a crash after PrepareCommit is written
and before the SHARE_DELTA is (both happen inside EndTxn): the restart completes the commit, and
the records are delivered again (at-least-once for that window).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import structlog
from kio.schema.errors import ErrorCode

from broker.share.ack_runs import AckBatch
from broker.share.ack_runs import MalformedAcks
from broker.share.ack_runs import ack_runs
from broker.share.record_state import AcknowledgeType
from broker.share.share_partition_manager import SharePartitionManager

log = structlog.get_logger("shoal.share")

TopicPartition = tuple[str, int]  # (topic name, partition): what a marker names

# Runs (offsets acknowledged alike) one transaction may stage, over all its share-partitions:
# its marker applies them in one go on the loop (~10 us a run: ~50 ms at most), as a
# ShareAcknowledge of that size would be. More is refused (INVALID_REQUEST); Shoal's client
# sends merged ranges, and no Kafka client sends this request at all.
MAX_STAGED_RUNS = 5_000
# A failed share-state write (a full or failing disk: `StorageError`): tried again with the
# marker. Other refusals mean the records are no longer there to acknowledge.
_RETRIED = frozenset({ErrorCode.kafka_storage_error, ErrorCode.unknown_server_error})


def owner_of(producer_id: int) -> str:
    """The owner of records staged by `producer_id`'s transaction. Not a member id a client
    can have: KIP-932 member ids are client-made UUIDs (22 characters of base64)."""
    return f"txn-pending:{producer_id}"


@dataclass(slots=True)
class _Staged:
    group_id: str
    topic_id: uuid.UUID
    batches: list[AckBatch]


class TxnShareAcks:
    """The acknowledgements staged by open transactions, by producer id and partition."""

    def __init__(self, manager: SharePartitionManager) -> None:
        self._manager = manager
        self._staged: dict[int, dict[TopicPartition, list[_Staged]]] = {}
        self._runs: dict[int, int] = {}  # runs staged per producer id (MAX_STAGED_RUNS)
        # `--processes N`, staging for a coordinator in another process: the epoch whose
        # transaction this process joined (`broker/txn_share_remote.py`), and the markers seen
        # per producer id while a join is asked for (Kafka's `VerificationGuard`).
        self._joined: dict[int, int] = {}
        self._guards: dict[int, list[int]] = {}  # producer id -> [markers seen, askers]

    def joined(self, producer_id: int, epoch: int) -> bool:
        """Whether this process joined `producer_id`'s transaction of `epoch` (and holds what
        it staged there since: only the transaction's end here forgets it, or a restart)."""
        return self._joined.get(producer_id) == epoch

    def guard(self, producer_id: int) -> int:
        """Start watching `producer_id`'s markers; the count to hand to `join`."""
        g = self._guards.setdefault(producer_id, [0, 0])
        g[1] += 1
        return g[0]

    def join(self, producer_id: int, epoch: int, guard: int | None) -> bool:
        """Stop watching (`guard` from `guard`; None: nothing more); with a guard, record the
        join unless a marker of the producer came meanwhile (its transaction ended while the
        coordinator was asked: staging now would outlive it). Whether it was recorded."""
        g = self._guards.get(producer_id)
        fresh = g is not None and guard is not None and g[0] == guard
        if g is not None:
            g[1] -= 1
            if g[1] <= 0:
                del self._guards[producer_id]
        if fresh:
            self._joined[producer_id] = epoch
        return fresh

    def staged(self, producer_id: int) -> int:
        """How many share-partitions `producer_id`'s transaction staged acknowledgements in."""
        return sum(len(v) for v in self._staged.get(producer_id, {}).values())

    def stage(
        self, producer_id: int, group_id: str, member_id: str, topic: str,
        topic_id: uuid.UUID, partition: int, batches: Sequence[AckBatch], now_ms: int,
    ) -> ErrorCode:  # fmt: skip
        """Move `member_id`'s records of `batches` to the transaction: all or none.
        INVALID_REQUEST for malformed batches or RENEW; INVALID_RECORD_STATE for a record the
        member does not hold (as ShareAcknowledge)."""
        room = MAX_STAGED_RUNS - self._runs.get(producer_id, 0)
        try:  # one run past the room is enough to refuse: the rest is never cut
            runs = list(islice(ack_runs(batches), max(room, 0) + 1))
        except MalformedAcks:
            return ErrorCode.invalid_request
        if any(ack is AcknowledgeType.RENEW for _, _, ack in runs):
            return ErrorCode.invalid_request
        if len(runs) > room:
            log.warning("share acknowledgements refused: too many for one transaction",
                        producer_id=producer_id, runs=len(runs), limit=MAX_STAGED_RUNS)  # fmt: skip
            return ErrorCode.invalid_request
        sp = self._manager.get(group_id, topic_id, partition, now_ms)
        if sp is None:
            return ErrorCode.unknown_topic_or_partition
        self._manager.finish_acknowledgement(sp.key)  # no plan in progress over its records
        refused = sp.hand_over(member_id, owner_of(producer_id), runs)
        if refused is not None:
            return refused
        self._runs[producer_id] = self._runs.get(producer_id, 0) + len(runs)
        by_tp = self._staged.setdefault(producer_id, {})
        entries = by_tp.setdefault((topic, partition), [])
        entry = next((e for e in entries if e.group_id == group_id), None)
        if entry is None:
            entries.append(_Staged(group_id, topic_id, list(batches)))
        else:  # a later request of the same transaction: batches stay sorted and disjoint
            entry.batches = sorted([*entry.batches, *batches], key=lambda b: b[0])
        return ErrorCode.none

    def end(self, tp: TopicPartition, producer_id: int, commit: bool, now_ms: int) -> bool:
        """The transaction's marker reaches `tp`: apply (COMMIT) or release (ABORT) what it
        staged there, durably, before the marker is written. False when a write failed: the
        rest stays staged and the coordinator tries the marker again."""
        self._joined.pop(producer_id, None)
        if (g := self._guards.get(producer_id)) is not None:
            g[0] += 1
        by_tp = self._staged.get(producer_id)
        entries = by_tp.get(tp) if by_tp else None
        if not entries:
            return True
        owner = owner_of(producer_id)
        while entries:
            e = entries[0]
            batches: Sequence[AckBatch] = e.batches
            if not commit:
                batches = [(b[0], b[1], [int(AcknowledgeType.RELEASE)]) for b in e.batches]
            code = self._manager.acknowledge(e.group_id, owner, e.topic_id, tp[1], batches, now_ms)
            if code in _RETRIED:  # the share state was not written: the marker waits for it
                log.warning("staged share acknowledgements not applied; retried", topic=tp[0],
                            partition=tp[1], group_id=e.group_id, producer_id=producer_id,
                            error=code.name)  # fmt: skip
                return False
            if code is not ErrorCode.none:  # the share-partition was reset or deleted meanwhile
                log.warning("staged share acknowledgements no longer held", topic=tp[0],
                            partition=tp[1], group_id=e.group_id, producer_id=producer_id,
                            error=code.name)  # fmt: skip
            entries.pop(0)
        assert by_tp is not None
        del by_tp[tp]
        if not by_tp:
            del self._staged[producer_id]
            self._runs.pop(producer_id, None)
        return True


EndShareAcks = Callable[[TopicPartition, int, bool, int], bool]
"""`TxnShareAcks.end`, as the transaction coordinator's marker writer calls it."""


def NoShareAcks(tp: TopicPartition, producer_id: int, commit: bool, now_ms: int) -> bool:
    """No share acknowledgements are ever staged (tools and tests without share groups)."""
    return True
