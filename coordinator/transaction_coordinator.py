"""The transaction coordinator: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn, transaction timeouts and id expiry, after Kafka's
`TransactionCoordinator` (core/src/main/scala/kafka/coordinator/transaction/, TV1 semantics:
no epoch bump per transaction, partitions added explicitly).

Synchronous and sans-IO: time comes in as `now_ms`, and what it writes goes through
collaborators passed in. Each move is written to the transaction log (`TransactionLog`) before
it takes effect in memory, as Kafka appends to `__transaction_state` before it answers. The
markers of an ended transaction are local appends here: EndTxn writes PrepareCommit (or
PrepareAbort), then `complete_step` writes the markers and the committed offsets a bounded
number at a time (a transaction may span a million partitions; the caller yields between
steps), then CompleteCommit. If a marker or the offsets cannot be written (a full disk), the
transaction stays prepared and the timer's steps write them again, as Kafka's marker channel
retries; a restart does the same for every prepared one.

No limit on a transaction's size: Kafka has none (`TransactionMetadata.topicPartitions` is an
unbounded set). What a request adds is written as an addition of its own
(`protocol.transaction_log`), so a request costs what it adds; a request's own size is bounded
by `socket.request.max.bytes` and the 1,000,000-element array cap, and its handler adds in
slices (`ADD_PER_CALL` partitions or `OFFSETS_PER_CALL` offsets at a time).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from itertools import islice

import structlog
from kio.schema.errors import ErrorCode

from coordinator import txn_metadata as moves
from coordinator.transaction_log import TransactionLog
from coordinator.txn_metadata import ENDED
from coordinator.txn_metadata import PREPARING
from coordinator.txn_metadata import TxnState
from coordinator.txn_metadata import is_epoch_exhausted
from coordinator.txn_metadata import is_whole
from coordinator.txn_metadata import state_of
from protocol.transaction_log import Addition
from protocol.transaction_log import PendingOffset
from protocol.transaction_log import TopicPartition
from protocol.transaction_log import TransactionRecord
from storage.errors import StorageError
from storage.topics import CONSUMER_OFFSETS

_log = structlog.get_logger("shoal.transactions")

# AddOffsetsToTxn adds the group's `__consumer_offsets` partition to the transaction, as Kafka
# does; Shoal's offsets log has one partition.
OFFSETS_PARTITION: TopicPartition = (CONSUMER_OFFSETS, 0)
# Shoal's own TxnShareAcknowledge adds this participant (Kafka's share-state topic, which Shoal
# does not have: share state lives in the partitions' logs), so the transaction log records
# that the transaction staged share acknowledgements; they are in memory only, so such a
# transaction still open at a start is aborted (`abort_open_with`).
# With `--processes N` each process that staged some adds its own, `(SHARE_STATE, its node id)`
# (`share_participant`), so the coordinator knows whom to ask before a commit
# (`broker/txn_share_remote.py`); none of them gets a marker.
SHARE_STATE = "__share_group_state"
SHARE_ACKS_PARTITION: TopicPartition = (SHARE_STATE, 0)
_NOT_LOGS = frozenset({OFFSETS_PARTITION, SHARE_ACKS_PARTITION})


def share_participant(node_id: int, nodes: int) -> TopicPartition:
    """The participant a process's staged share acknowledgements add to a transaction."""
    return SHARE_ACKS_PARTITION if nodes == 1 else (SHARE_STATE, node_id)


# What one call may add to a transaction (handlers cut larger requests into calls, yielding
# between them): its addition is encoded on the loop, ~2 us a partition, ~10 us an offset.
ADD_PER_CALL = 5_000
OFFSETS_PER_CALL = 1_000
# Per step of a prepared transaction's completion: markers (one append each) or offsets.
MARKERS_PER_STEP = 500
OFFSETS_PER_STEP = 1_000
END_STEPS = 3  # markers, offsets, completion: a small transaction ends at once

# Writes the markers of a transaction into its partitions; returns those not written.
WriteMarkers = Callable[[Iterable[TopicPartition], int, int, bool], set[TopicPartition]]
# Commits a group's offsets for good (raises StorageError when not written).
CommitOffsets = Callable[[str, Mapping[TopicPartition, PendingOffset]], None]


@dataclass(frozen=True, slots=True)
class OffsetsPlacement:
    """Which `__consumer_offsets` partition holds a group's offsets (AddOffsetsToTxn adds it to
    the transaction, as Kafka's `partitionFor(groupId)`), and which partitions take a marker.

    One process (the default): every group's is `OFFSETS_PARTITION`, whose offsets the
    coordinator keeps in the transaction's state and commits itself: no marker. With
    `--processes N`, a group's is `(__consumer_offsets, its coordinator's node id)`; only this
    node's own is marker-less, the others' markers go to their process, which staged the
    offsets (`coordinator/staged_offsets.py`)."""

    node_id: int = 0
    nodes: int = 1
    hash_group: Callable[[str], int] | None = None

    def partition(self, group_id: str) -> TopicPartition:
        if self.nodes == 1 or self.hash_group is None:
            return OFFSETS_PARTITION
        return (CONSUMER_OFFSETS, self.hash_group(group_id) % self.nodes)

    def gets_marker(self, tp: TopicPartition) -> bool:
        if self.nodes == 1:
            return tp not in _NOT_LOGS
        return tp[0] != SHARE_STATE and tp != (CONSUMER_OFFSETS, self.node_id)


@dataclass(frozen=True, slots=True)
class TxnLimits:
    max_timeout_ms: int  # transaction.max.timeout.ms
    id_expiration_ms: int  # transactional.id.expiration.ms


@dataclass(slots=True)
class _Completion:
    """What a prepared transaction still lacks: its partitions' markers (an iterator over
    its set, which no longer changes; failed ones are retried first), then its offsets."""

    markers: Iterator[TopicPartition]
    offsets: Iterator[tuple[str, TopicPartition, PendingOffset]]
    retry: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class InitResult:
    error_code: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(
        self,
        log: TransactionLog,
        allocate_producer_id: Callable[[], int],
        write_markers: WriteMarkers,
        commit_offsets: CommitOffsets,
        limits: Callable[[], TxnLimits],
        placement: OffsetsPlacement | None = None,
    ) -> None:
        """:raises OSError: from `allocate_producer_id`, only when called."""
        self._placement = placement or OffsetsPlacement()
        self._log = log
        self._allocate = allocate_producer_id
        self._write_markers = write_markers
        self._commit_offsets = commit_offsets
        self._limits = limits
        self.txns: dict[str, TransactionRecord] = log.recover()
        # The ids whose transaction holds offsets (OffsetFetch asks of every partition).
        self._with_offsets = {txn_id for txn_id, m in self.txns.items() if m.offsets}
        self._completing: dict[str, _Completion] = {}

    # --- InitProducerId ---------------------------------------------------------------

    def init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None, now_ms: int
    ) -> InitResult:
        """Kafka's `handleInitProducerId` with `prepareInitProducerIdTransit`."""
        if not txn_id:
            return InitResult(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self._limits().max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        m = self.txns.get(txn_id)
        if m is None:
            try:
                m = moves.new_id(txn_id, self._allocate(), timeout_ms, now_ms)
            except OSError:  # no producer id block recorded (a full disk): retriable
                return InitResult(ErrorCode.coordinator_load_in_progress)
        if expected is not None and not _may_claim(m, *expected):
            return InitResult(ErrorCode.producer_fenced)
        state = state_of(m)
        if state in PREPARING:
            return InitResult(ErrorCode.concurrent_transactions)
        if state is TxnState.ONGOING:
            # Abort it under a bumped epoch; the client retries and bumps again (Kafka answers
            # CONCURRENT_TRANSACTIONS, never the fencing epoch itself).
            _log.warning("transaction aborted: its producer fenced by a new InitProducerId",
                         transactional_id=txn_id, producer_id=m.producer_id,
                         producer_epoch=m.producer_epoch)  # fmt: skip
            code = self._end(moves.fence(m, now_ms), now_ms)
            return InitResult(ErrorCode.concurrent_transactions if code is None else code)
        if expected is not None and expected[1] not in (m.producer_epoch, -1):
            if expected[1] == m.last_producer_epoch:  # a retry of the bump it never heard of
                return InitResult(ErrorCode.none, m.producer_id, m.producer_epoch)
            return InitResult(ErrorCode.producer_fenced)  # Kafka's prepareIncrementProducerEpoch
        return self._bump(m, timeout_ms, now_ms)

    def _bump(self, m: TransactionRecord, timeout_ms: int, now_ms: int) -> InitResult:
        """The next epoch, or a new producer id once the epoch is exhausted; written first."""
        if is_epoch_exhausted(m.producer_epoch):
            try:
                new = moves.rotate_producer_id(m, self._allocate(), timeout_ms, now_ms)
            except OSError:
                return InitResult(ErrorCode.coordinator_load_in_progress)
        else:
            new = moves.next_epoch(m, timeout_ms, now_ms)
        code = self._write(new)
        if code is not None:
            return InitResult(code)
        _log.info("transactional id initialised", transactional_id=new.transactional_id,
                  producer_id=new.producer_id, producer_epoch=new.producer_epoch)  # fmt: skip
        return InitResult(ErrorCode.none, new.producer_id, new.producer_epoch)

    # --- adding to a transaction --------------------------------------------------------

    def _current(self, txn_id: str, producer_id: int, epoch: int) -> TransactionRecord | ErrorCode:
        """The id's state if the producer may act on it, else the error Kafka answers."""
        if not txn_id:
            return ErrorCode.invalid_request
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if m.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        if state_of(m) in PREPARING:
            return ErrorCode.concurrent_transactions
        return m

    def add_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> ErrorCode:  # fmt: skip
        """Kafka's `handleAddPartitionsToTransaction`: one answer for all the partitions."""
        m = self._current(txn_id, producer_id, epoch)
        if isinstance(m, ErrorCode):
            return m
        if state_of(m) is TxnState.ONGOING:
            added = [tp for tp in partitions if tp not in m.partitions]
            if not added:
                return ErrorCode.none
        else:
            added = list(partitions)
        return self._add(m, added, "", {}, now_ms)

    def verify(
        self, txn_id: str, producer_id: int, epoch: int, partition: TopicPartition
    ) -> ErrorCode:
        """Whether a transactional batch may be written to `partition` (KIP-890 part 1,
        Kafka's `handleVerifyPartitionsInTransaction`): TRANSACTION_ABORTABLE when it was not
        added; callers answer older clients INVALID_TXN_STATE, as Kafka's
        `AddPartitionsToTxnManager` does."""
        m = self._current(txn_id, producer_id, epoch)
        if isinstance(m, ErrorCode):
            return m
        if state_of(m) is not TxnState.ONGOING or partition not in m.partitions:
            return ErrorCode.transaction_abortable
        return ErrorCode.none

    def add_offsets(
        self, txn_id: str, producer_id: int, epoch: int, group_id: str, now_ms: int
    ) -> ErrorCode:
        """Kafka's AddOffsetsToTxn: the group's offsets partition joins the transaction."""
        partition = self._placement.partition(group_id)
        return self.add_partitions(txn_id, producer_id, epoch, (partition,), now_ms)

    def txn_offset_commit(
        self, txn_id: str, producer_id: int, epoch: int, group_id: str,
        offsets: Mapping[TopicPartition, PendingOffset], now_ms: int,
    ) -> ErrorCode:  # fmt: skip
        """Offsets the transaction commits for `group_id`: written with the transaction's
        state, committed for good (OffsetFetch sees them) only when it commits."""
        m = self._current(txn_id, producer_id, epoch)
        if isinstance(m, ErrorCode):
            return ErrorCode.invalid_producer_epoch if m is ErrorCode.producer_fenced else m
        if (state_of(m) is not TxnState.ONGOING
                or self._placement.partition(group_id) not in m.partitions):  # fmt: skip
            return ErrorCode.transaction_abortable  # no AddOffsetsToTxn came first
        return self._add(m, (), group_id, offsets, now_ms)

    def _add(
        self, m: TransactionRecord, partitions: Collection[TopicPartition], group: str,
        offsets: Mapping[TopicPartition, PendingOffset], now_ms: int,
    ) -> ErrorCode:  # fmt: skip
        """Write what a request adds (with the start of a new transaction, if it starts one),
        then put it in place."""
        begun = moves.begin(m, now_ms) if state_of(m) in ENDED else None
        current = begun or m
        if is_whole(current):  # begun before additions existed
            new = moves.whole(current, partitions, group, offsets, now_ms)
            return self._write(new) or ErrorCode.none
        addition = Addition(current.txn, partitions, group, offsets)
        try:
            self._log.append_addition(m.transactional_id, current.additions, addition, begun)
        except StorageError as e:
            _log.warning("transaction state not written", transactional_id=m.transactional_id,
                         error=str(e))  # fmt: skip
            return ErrorCode.not_coordinator
        self._set(moves.grow(current, partitions, group, offsets, now_ms))
        return ErrorCode.none

    def has_pending_offset(self, group_id: str, partition: TopicPartition) -> bool:
        """An open transaction commits an offset of the group's `partition` (OffsetFetch
        with RequireStable answers UNSTABLE_OFFSET_COMMIT, as Kafka's GroupMetadata does)."""
        txns = self.txns
        return any(partition in txns[i].offsets.get(group_id, ()) for i in self._with_offsets)

    # --- describing (the admin APIs) ----------------------------------------------------

    def list(
        self, states: set[str], producer_ids: set[int], min_duration_ms: int, now_ms: int
    ) -> list[TransactionRecord]:
        """Kafka's `TransactionStateManager.listTransactionStates`: every id, or those in one of
        `states`, of one of `producer_ids`, open at least `min_duration_ms` (when >= 0)."""
        return [
            m for m in self.txns.values()
            if (not states or m.state in states)
            and (not producer_ids or m.producer_id in producer_ids)
            and (min_duration_ms < 0 or 0 <= m.start_ms <= now_ms - min_duration_ms)
        ]  # fmt: skip

    # --- ending a transaction ----------------------------------------------------------

    def end_txn(
        self, txn_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int
    ) -> ErrorCode:
        """Kafka's `endTransactionWithTV1`, from a client."""
        if not txn_id:
            return ErrorCode.invalid_request
        m = self.txns.get(txn_id)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if m.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        state = state_of(m)
        if state is TxnState.ONGOING:
            return self._end(moves.prepare_end(m, commit, now_ms), now_ms) or ErrorCode.none
        wanted = {True: TxnState.COMPLETE_COMMIT, False: TxnState.COMPLETE_ABORT}[commit]
        preparing = {True: TxnState.PREPARE_COMMIT, False: TxnState.PREPARE_ABORT}[commit]
        if state is wanted:
            return ErrorCode.none  # a retry of an EndTxn that was done
        if state is preparing:
            return ErrorCode.concurrent_transactions
        return ErrorCode.invalid_txn_state

    def _end(self, prepared: TransactionRecord, now_ms: int) -> ErrorCode | None:
        """Write the prepared state, then complete it if that takes no more than END_STEPS
        steps (a transaction of up to MARKERS_PER_STEP partitions and OFFSETS_PER_STEP
        offsets); the caller finishes a larger one step by step (`complete_step`). The answer
        depends on the first write only: the decision is durable."""
        code = self._write(prepared)
        if code is None:
            for _ in range(END_STEPS):
                if self.complete_step(prepared.transactional_id, now_ms) is not False:
                    break
        return code

    def complete_step(self, txn_id: str, now_ms: int) -> bool | None:
        """One bounded step of what a prepared transaction lacks: up to MARKERS_PER_STEP
        markers, else (on commit) up to OFFSETS_PER_STEP offsets, else CompleteCommit or
        CompleteAbort. True once it is complete (or `txn_id` was not prepared), False while
        steps remain, None when a write failed (the state stays prepared; retried later)."""
        m = self.txns.get(txn_id)
        if m is None or state_of(m) not in PREPARING:
            self._completing.pop(txn_id, None)
            return True
        commit = state_of(m) is TxnState.PREPARE_COMMIT
        todo = self._completing.get(txn_id)
        if todo is None:
            offsets: Iterator[tuple[str, TopicPartition, PendingOffset]] = iter(())
            if commit:
                offsets = ((g, tp, o) for g, tps in m.offsets.items() for tp, o in tps.items())
            todo = self._completing[txn_id] = _Completion(iter(m.partitions), offsets)
        wrote = self._markers_step(m, todo, commit)
        if wrote is None or wrote:
            return None if wrote is None else False
        wrote = self._offsets_step(txn_id, todo)
        if wrote is None or wrote:
            return None if wrote is None else False
        if self._write(moves.complete(m, now_ms)) is not None:
            return None
        del self._completing[txn_id]
        return True

    def _markers_step(self, m: TransactionRecord, todo: _Completion, commit: bool) -> bool | None:
        """Up to MARKERS_PER_STEP markers: whether any were due; None when one failed."""
        chunk = todo.retry[-MARKERS_PER_STEP:]
        del todo.retry[-MARKERS_PER_STEP:]
        chunk.extend(islice(todo.markers, MARKERS_PER_STEP - len(chunk)))
        if not chunk:
            return False
        data = [tp for tp in chunk if self._placement.gets_marker(tp)]
        failed = self._write_markers(data, m.producer_id, m.producer_epoch, commit)
        if failed:  # the writer said why (a full disk; or on their way to another process)
            todo.retry.extend(failed)
            return None
        return True

    def _offsets_step(self, txn_id: str, todo: _Completion) -> bool | None:
        """Up to OFFSETS_PER_STEP offsets committed: whether any were due; None on failure."""
        rows = list(islice(todo.offsets, OFFSETS_PER_STEP))
        if not rows:
            return False
        by_group: dict[str, dict[TopicPartition, PendingOffset]] = {}
        for group, tp, offset in rows:
            by_group.setdefault(group, {})[tp] = offset
        try:
            for group, offsets in by_group.items():
                self._commit_offsets(group, offsets)
        except StorageError as e:
            todo.offsets = iter(rows + list(todo.offsets))  # committing again is harmless
            _log.warning("transaction's offsets not committed; retried",
                         transactional_id=txn_id, error=str(e))  # fmt: skip
            return None
        return True

    def complete(self, txn_id: str, now_ms: int) -> bool:
        """Every step at once (tests, and a start before any client is served)."""
        while (done := self.complete_step(txn_id, now_ms)) is False:
            pass
        return done is True

    # --- time ---------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort (fencing the producer) every transaction open longer than its timeout, as
        Kafka's `abortTimedOutTransactions`, at once (tests; the broker's timer goes id by id,
        `abort_if_timed_out`). Returns how many."""
        return sum(self.abort_if_timed_out(txn_id, now_ms) for txn_id in list(self.txns))

    def abort_if_timed_out(self, txn_id: str, now_ms: int) -> bool:
        """Abort the transaction of `txn_id` (fencing its producer) if it is open longer than
        its timeout: one id's share of `abortTimedOutTransactions`, its state read afresh (a
        caller yielding between ids may find it ended meanwhile). Whether it was aborted."""
        m = self.txns.get(txn_id)
        if m is None or state_of(m) is not TxnState.ONGOING or m.start_ms + m.timeout_ms >= now_ms:
            return False
        _log.warning("transaction aborted: open longer than its timeout",
                     transactional_id=m.transactional_id, producer_id=m.producer_id,
                     timeout_ms=m.timeout_ms)  # fmt: skip
        self._end(moves.fence(m, now_ms), now_ms)
        return True

    def abort_open_with(self, partition: TopicPartition, now_ms: int) -> int:
        """Abort (fencing the producer) every open transaction `partition` takes part in: at a
        start, those whose staged share acknowledgements were lost with the memory
        (`SHARE_ACKS_PARTITION`), which could no longer commit what they promised."""
        doomed = [
            m for m in self.txns.values()
            if state_of(m) is TxnState.ONGOING and partition in m.partitions
        ]  # fmt: skip
        for m in doomed:
            _log.warning("transaction aborted: its staged share acknowledgements were lost "
                         "in a restart", transactional_id=m.transactional_id,
                         producer_id=m.producer_id)  # fmt: skip
            self._end(moves.fence(m, now_ms), now_ms)
        return len(doomed)

    def abort_lost(self, txn_id: str, producer_id: int, epoch: int, now_ms: int) -> bool:
        """Abort (fencing the producer) the transaction open at `epoch`, whose share
        acknowledgements staged in another process were lost there (a restart: they live in
        memory), before its commit is decided (`broker/txn_share_remote.py`). Whether it was."""
        m = self._current(txn_id, producer_id, epoch)
        if isinstance(m, ErrorCode) or state_of(m) is not TxnState.ONGOING:
            return False
        _log.warning("transaction aborted: share acknowledgements it staged in another process "
                     "were lost in a restart", transactional_id=txn_id,
                     producer_id=producer_id)  # fmt: skip
        self._end(moves.fence(m, now_ms), now_ms)
        return True

    def prepared(self) -> Sequence[str]:
        """The ids whose transaction is prepared: markers, offsets or completion to write
        (after a failed write, and at start for those a crash left prepared)."""
        return [txn_id for txn_id, m in self.txns.items() if state_of(m) in PREPARING]

    def complete_prepared(self, now_ms: int) -> int:
        """Write at once what every prepared transaction lacks; how many completed."""
        return len([txn_id for txn_id in self.prepared() if self.complete(txn_id, now_ms)])

    def expired_ids(self, now_ms: int) -> Sequence[str]:
        """Ids unused for `transactional.id.expiration.ms` (their last transaction ended), as
        Kafka's `removeExpiredTransactionalIds`."""
        return self.expired_ids_of(list(self.txns), now_ms)

    def forget_step(self, txn_id: str, now_ms: int) -> bool | None:
        """One batch of an expired id's tombstones (its slots first, its state last). True
        once it is forgotten, False while batches remain, None when it is no longer expired
        (used again meanwhile) or a write failed."""
        if txn_id not in self.expired_ids_of((txn_id,), now_ms):
            return None
        try:
            if not self._log.delete(txn_id):
                return False
        except StorageError as e:
            _log.warning("expired transactional id not forgotten", transactional_id=txn_id,
                         error=str(e))  # fmt: skip
            return None
        del self.txns[txn_id]
        self._with_offsets.discard(txn_id)
        self._completing.pop(txn_id, None)
        return True

    def expired_ids_of(self, ids: Iterable[str], now_ms: int) -> Sequence[str]:
        limit = self._limits().id_expiration_ms
        return [
            i for i in ids
            if (m := self.txns.get(i)) is not None and state_of(m) in ENDED
            and m.update_ms + limit <= now_ms
        ]  # fmt: skip

    def expire_ids(self, now_ms: int) -> int:
        """Forget every expired id at once (tests); the broker's timer goes step by step."""
        forgotten = 0
        for txn_id in self.expired_ids(now_ms):
            while (done := self.forget_step(txn_id, now_ms)) is False:
                pass
            forgotten += 1 if done else 0
        if forgotten:
            _log.info("transactional ids expired", count=forgotten)
        return forgotten

    # --- writing ------------------------------------------------------------------------

    def _write(self, m: TransactionRecord) -> ErrorCode | None:
        """Write `m`, then make it the id's state; None when written. A failed write leaves
        memory as it was and answers NOT_COORDINATOR, as Kafka maps KAFKA_STORAGE_ERROR of
        `__transaction_state` (`TransactionStateManager.appendTransactionToLog`)."""
        try:
            self._log.append(m)
        except StorageError as e:
            _log.warning("transaction state not written", transactional_id=m.transactional_id,
                         error=str(e))  # fmt: skip
            return ErrorCode.not_coordinator
        self._set(m)
        return None

    def _set(self, m: TransactionRecord) -> None:
        self.txns[m.transactional_id] = m
        if m.offsets:
            self._with_offsets.add(m.transactional_id)
        else:
            self._with_offsets.discard(m.transactional_id)


def _may_claim(m: TransactionRecord, producer_id: int, epoch: int) -> bool:
    """InitProducerId v3+ with the producer's id and epoch (KIP-360): it may go on if the id
    was just made, or is the current one, or the previous one with an exhausted epoch (a retry
    of a rotation it never heard back from). Kafka's `isValidProducerId`."""
    return (
        m.producer_epoch == -1
        or producer_id == m.producer_id
        or (producer_id == m.last_producer_id and is_epoch_exhausted(epoch))
    )
