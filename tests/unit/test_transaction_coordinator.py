"""TransactionCoordinator, sans-IO: Kafka's transaction state machine
(core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala, TV1) over an
in-memory transaction log, with markers and offset commits recorded."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from coordinator.transaction_coordinator import ADD_PER_CALL
from coordinator.transaction_coordinator import END_STEPS
from coordinator.transaction_coordinator import MARKERS_PER_STEP
from coordinator.transaction_coordinator import OFFSETS_PARTITION
from coordinator.transaction_coordinator import SHARE_ACKS_PARTITION
from coordinator.transaction_coordinator import TransactionCoordinator
from coordinator.transaction_coordinator import TxnLimits
from coordinator.transaction_log import TransactionLog
from protocol.record_batch import build_batch
from protocol.transaction_log import PendingOffset
from protocol.transaction_log import TopicPartition
from protocol.transaction_log import TransactionRecord
from protocol.transaction_log import encode_key
from protocol.transaction_log import encode_value
from storage.errors import KafkaStorageError
from storage.memory_log import MemoryLog

T0 = 1_000_000
TIMEOUT = 60_000
TP = ("orders", 0)


class World:
    """The coordinator's collaborators: a transaction log, markers and committed offsets."""

    def __init__(self) -> None:
        self.log = MemoryLog()
        self.next_id = 100
        self.markers: list[tuple[TopicPartition, int, int, bool]] = []
        self.committed: dict[str, dict[TopicPartition, int]] = {}
        self.broken: set[TopicPartition] = set()  # partitions whose marker writes fail

    def allocate(self) -> int:
        self.next_id += 1
        return self.next_id

    def write_markers(
        self, partitions: Iterable[TopicPartition], pid: int, epoch: int, commit: bool
    ) -> set[TopicPartition]:
        failed = set()
        for tp in partitions:
            if tp in self.broken:
                failed.add(tp)
            else:
                self.markers.append((tp, pid, epoch, commit))
        return failed

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, PendingOffset]) -> None:
        self.committed.setdefault(group, {}).update({tp: o.offset for tp, o in offsets.items()})

    def coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            TransactionLog(self.log, lambda: T0), self.allocate, self.write_markers,
            self.commit_offsets, lambda: TxnLimits(900_000, 7 * 86_400_000),
        )  # fmt: skip


def ready(world: World, txn_id: str = "t") -> tuple[TransactionCoordinator, int, int]:
    c = world.coordinator()
    r = c.init_producer_id(txn_id, TIMEOUT, None, T0)
    assert r.error_code is ErrorCode.none
    return c, r.producer_id, r.producer_epoch


def test_a_new_id_gets_a_producer_id_at_epoch_0_and_each_init_bumps_it() -> None:
    c, pid, epoch = ready(World())
    assert epoch == 0
    again = c.init_producer_id("t", TIMEOUT, None, T0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (ErrorCode.none, pid, 1)


def test_timeouts_above_the_broker_maximum_are_refused() -> None:
    c = World().coordinator()
    assert (
        c.init_producer_id("t", 900_001, None, T0).error_code
        is ErrorCode.invalid_transaction_timeout
    )
    assert c.init_producer_id("", TIMEOUT, None, T0).error_code is ErrorCode.invalid_request


def test_commit_writes_commit_markers_then_the_offsets() -> None:
    world = World()
    c, pid, epoch = ready(world)
    assert c.add_partitions("t", pid, epoch, [TP, ("orders", 1)], T0) is ErrorCode.none
    assert c.add_offsets("t", pid, epoch, "g", T0) is ErrorCode.none
    offsets = {("in", 0): PendingOffset(42)}
    assert c.txn_offset_commit("t", pid, epoch, "g", offsets, T0) is ErrorCode.none
    assert c.has_pending_offset("g", ("in", 0))
    assert world.committed == {}  # not before the commit
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none
    assert sorted(world.markers) == [(TP, pid, 0, True), (("orders", 1), pid, 0, True)]
    assert world.committed == {"g": {("in", 0): 42}}
    assert not c.has_pending_offset("g", ("in", 0))
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none  # a retry: done already
    assert c.end_txn("t", pid, epoch, False, T0) is ErrorCode.invalid_txn_state


def test_abort_writes_abort_markers_and_drops_the_offsets() -> None:
    world = World()
    c, pid, epoch = ready(world)
    c.add_partitions("t", pid, epoch, [TP, OFFSETS_PARTITION], T0)
    c.txn_offset_commit("t", pid, epoch, "g", {("in", 0): PendingOffset(7)}, T0)
    assert c.end_txn("t", pid, epoch, False, T0) is ErrorCode.none
    assert world.markers == [(TP, pid, 0, False)]  # none into the offsets log itself
    assert world.committed == {}


def test_offsets_need_add_offsets_first() -> None:
    c, pid, epoch = ready(World())
    c.add_partitions("t", pid, epoch, [TP], T0)
    code = c.txn_offset_commit("t", pid, epoch, "g", {("in", 0): PendingOffset(1)}, T0)
    assert code is ErrorCode.transaction_abortable


def test_a_produce_to_a_partition_not_added_is_not_verified() -> None:
    c, pid, epoch = ready(World())
    assert c.verify("t", pid, epoch, TP) is ErrorCode.transaction_abortable  # no transaction
    c.add_partitions("t", pid, epoch, [TP], T0)
    assert c.verify("t", pid, epoch, TP) is ErrorCode.none
    assert c.verify("t", pid, epoch, ("orders", 9)) is ErrorCode.transaction_abortable
    assert c.verify("t", pid, epoch + 1, TP) is ErrorCode.producer_fenced
    assert c.verify("other", pid, epoch, TP) is ErrorCode.invalid_producer_id_mapping


def test_a_second_init_fences_an_open_transaction_by_aborting_it_under_a_new_epoch() -> None:
    world = World()
    c, pid, epoch = ready(world)
    c.add_partitions("t", pid, epoch, [TP], T0)
    assert (
        c.init_producer_id("t", TIMEOUT, None, T0).error_code is ErrorCode.concurrent_transactions
    )
    assert world.markers == [(TP, pid, 1, False)]  # the abort carries the fencing epoch
    retry = c.init_producer_id("t", TIMEOUT, None, T0)
    assert (retry.error_code, retry.producer_epoch) == (ErrorCode.none, 2)
    # The zombie, still at epoch 0:
    assert c.add_partitions("t", pid, epoch, [TP], T0) is ErrorCode.producer_fenced
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.producer_fenced


def test_an_init_with_another_producers_id_is_fenced() -> None:
    c, pid, epoch = ready(World())
    assert (
        c.init_producer_id("t", TIMEOUT, (pid + 50, 0), T0).error_code is ErrorCode.producer_fenced
    )
    assert c.init_producer_id("t", TIMEOUT, (pid, epoch), T0).producer_epoch == epoch + 1


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    world = World()
    c, pid, epoch = ready(world)
    c.add_partitions("t", pid, epoch, [TP], T0)
    assert c.abort_timed_out(T0 + TIMEOUT) == 0
    assert c.abort_timed_out(T0 + TIMEOUT + 1) == 1
    assert world.markers == [(TP, pid, 1, False)]
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.producer_fenced


def test_the_state_is_recovered_from_the_log() -> None:
    world = World()
    c, pid, epoch = ready(world)
    c.add_partitions("t", pid, epoch, [TP, OFFSETS_PARTITION], T0)
    c.txn_offset_commit("t", pid, epoch, "g", {("in", 0): PendingOffset(3, 2, "m")}, T0)
    again = world.coordinator()
    assert again.txns == c.txns
    assert again.end_txn("t", pid, epoch, True, T0) is ErrorCode.none
    assert world.committed == {"g": {("in", 0): 3}}


def test_markers_not_written_are_written_again_later_and_after_a_restart() -> None:
    world = World()
    c, pid, epoch = ready(world)
    c.add_partitions("t", pid, epoch, [TP], T0)
    world.broken = {TP}
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none  # the decision is written
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.concurrent_transactions
    assert c.add_partitions("t", pid, epoch, [TP], T0) is ErrorCode.concurrent_transactions
    restarted = world.coordinator()  # a crash here: the restart finishes it
    world.broken = set()
    assert restarted.complete_prepared(T0) == 1
    assert world.markers == [(TP, pid, 0, True)]
    assert restarted.end_txn("t", pid, epoch, True, T0) is ErrorCode.none


def test_a_failed_state_write_changes_nothing() -> None:
    world = World()
    c, pid, epoch = ready(world)

    def full(*args: object, **kwargs: object) -> object:
        raise KafkaStorageError("disk full")

    world.log.append = full  # type: ignore[method-assign]
    assert c.add_partitions("t", pid, epoch, [TP], T0) is ErrorCode.not_coordinator
    assert c.verify("t", pid, epoch, TP) is ErrorCode.transaction_abortable


def test_ids_unused_for_the_expiration_time_are_forgotten() -> None:
    world = World()
    c, _, _ = ready(world)
    assert c.expire_ids(T0 + 7 * 86_400_000 - 1) == 0
    assert c.expire_ids(T0 + 7 * 86_400_000) == 1
    assert world.coordinator().txns == {}


def _written(world: World) -> list[int]:
    """The size of each batch appended to the transaction log from now on."""
    sizes: list[int] = []
    append = world.log.append

    def counted(batch: bytes, **kwargs: object) -> object:
        sizes.append(len(batch))
        return append(batch, **kwargs)  # type: ignore[arg-type]

    world.log.append = counted  # type: ignore[method-assign]
    return sizes


def test_a_transaction_has_no_entry_limit_and_a_request_writes_what_it_adds() -> None:
    """Promise 4: Kafka bounds no transaction (`TransactionMetadata.topicPartitions` is a
    set that grows with every AddPartitionsToTxn), so neither does Shoal. A request writes
    only what it adds (an addition record), not the whole transaction again: adding one
    partition or one offset to a transaction of 100,000 writes a few hundred bytes."""
    world = World()
    c, pid, epoch = ready(world)
    for start in range(0, 100_000, ADD_PER_CALL):
        tps = [("wide", p) for p in range(start, start + ADD_PER_CALL)]
        assert c.add_partitions("t", pid, epoch, tps, T0) is ErrorCode.none
    assert c.add_offsets("t", pid, epoch, "g", T0) is ErrorCode.none
    offsets = {("in", p): PendingOffset(p) for p in range(20_000)}
    assert c.txn_offset_commit("t", pid, epoch, "g", offsets, T0) is ErrorCode.none
    sizes = _written(world)
    assert c.add_partitions("t", pid, epoch, [("wide", 100_000)], T0) is ErrorCode.none
    assert c.txn_offset_commit("t", pid, epoch, "g", {("in", 0): PendingOffset(9)}, T0) is (
        ErrorCode.none
    )
    assert len(sizes) == 2 and max(sizes) < 300, sizes
    assert len(c.txns["t"].partitions) == 100_002  # with the offsets partition
    again = world.coordinator()
    assert again.txns == c.txns  # the additions rebuild it
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none
    assert c.complete("t", T0)
    assert len(world.markers) == 100_001
    assert len(world.committed["g"]) == 20_000 and world.committed["g"][("in", 0)] == 9


def test_a_large_transaction_ends_step_by_step_each_marker_written_once() -> None:
    """EndTxn answers once the decision is written (Kafka's `endTransaction` answers before
    its markers are sent); the markers follow in bounded steps, and meanwhile the transaction
    is prepared (CONCURRENT_TRANSACTIONS to a retry, as Kafka answers)."""
    world = World()
    c, pid, epoch = ready(world)
    tps = [("wide", p) for p in range((END_STEPS + 1) * MARKERS_PER_STEP)]
    assert c.add_partitions("t", pid, epoch, tps, T0) is ErrorCode.none
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none
    assert len(world.markers) < len(tps)
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.concurrent_transactions
    steps = 0
    while c.complete_step("t", T0) is False:
        steps += 1
    assert steps >= 1
    assert sorted(m[0] for m in world.markers) == sorted(tps)
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none  # done


def test_a_later_transaction_ignores_the_earlier_ones_additions() -> None:
    """Additions are kept in slots the id reuses: after a transaction of three additions, one
    of one addition recovers with that one only."""
    world = World()
    c, pid, epoch = ready(world)
    for p in range(3):
        assert c.add_partitions("t", pid, epoch, [("a", p)], T0) is ErrorCode.none
    assert c.end_txn("t", pid, epoch, False, T0) is ErrorCode.none
    assert c.add_partitions("t", pid, epoch, [("b", 0)], T0) is ErrorCode.none
    assert world.coordinator().txns["t"].partitions == {("b", 0)}
    assert c.end_txn("t", pid, epoch, True, T0) is ErrorCode.none
    assert world.coordinator().txns["t"].partitions == set()


def test_an_expired_id_leaves_no_addition_behind() -> None:
    """Forgetting an id tombstones its slots: the id made again starts from nothing."""
    world = World()
    c, pid, epoch = ready(world)
    for p in range(3):
        c.add_partitions("t", pid, epoch, [("a", p)], T0)
    c.end_txn("t", pid, epoch, True, T0)
    assert c.expire_ids(T0 + 7 * 86_400_000) == 1
    c = world.coordinator()
    assert c.txns == {}
    again = c.init_producer_id("t", TIMEOUT, None, T0)
    c.add_partitions("t", again.producer_id, again.producer_epoch, [("b", 0)], T0)
    assert world.coordinator().txns["t"].partitions == {("b", 0)}


def test_a_transaction_written_whole_before_additions_is_read_and_goes_on_whole() -> None:
    """A log written before additions (the whole transaction in the id's record, no `txn`)
    reads as it was written; that open transaction goes on being written whole."""
    world = World()
    old = TransactionRecord(
        "t", 7, 0, TIMEOUT, "Ongoing", {("a", 0)}, start_ms=T0, update_ms=T0,
        offsets={"g": {("in", 0): PendingOffset(5)}},
    )  # fmt: skip
    world.log.append(
        build_batch([(encode_key("t"), encode_value(old))], timestamp_ms=T0), now_ms=T0
    )
    c = world.coordinator()
    assert c.txns["t"] == old
    assert c.add_partitions("t", 7, 0, [("a", 1), OFFSETS_PARTITION], T0) is ErrorCode.none
    assert world.coordinator().txns["t"].partitions == {("a", 0), ("a", 1), OFFSETS_PARTITION}
    assert c.end_txn("t", 7, 0, True, T0) is ErrorCode.none
    assert world.committed == {"g": {("in", 0): 5}}
    assert c.add_partitions("t", 7, 0, [("b", 0)], T0) is ErrorCode.none  # the next: additions
    assert world.coordinator().txns["t"].partitions == {("b", 0)}


def test_an_open_transaction_with_staged_share_acks_is_aborted_at_a_start() -> None:
    """Shoal's TxnShareAcknowledge: its staged acknowledgements are in memory only, so a
    coordinator recovered from the log aborts (fencing) the open transactions that staged any,
    and no marker goes to the `SHARE_ACKS_PARTITION` participant; others stay open."""
    world = World()
    c, pid, epoch = ready(world)
    u = c.init_producer_id("u", TIMEOUT, None, T0)
    assert c.add_partitions("t", pid, epoch, [TP, SHARE_ACKS_PARTITION], T0) is ErrorCode.none
    assert c.add_partitions("u", u.producer_id, 0, [("orders", 1)], T0) is ErrorCode.none
    recovered = world.coordinator()
    assert recovered.abort_open_with(SHARE_ACKS_PARTITION, T0 + 1) == 1
    assert world.markers == [(TP, pid, epoch + 1, False)]  # the abort, under the fencing epoch
    assert recovered.end_txn("t", pid, epoch, True, T0 + 2) is ErrorCode.producer_fenced
    assert recovered.txns["u"].state == "Ongoing"
