"""A partition's acknowledgement done in steps (`AckJob`), the rule that refuses only what no
client could send, and what the manager holds back while a job runs. Over in-memory logs.

Kafka's `SharePartition.acknowledge` (core/src/main/java/kafka/server/share/
SharePartition.java) is the reference: every batch of a request for a partition applies or
none does (`rollbackOrProcessStateUpdates`), its state is persisted in one write, and a batch
past the acquired records is INVALID_REQUEST (`fetchSubMapForAcknowledgementBatch`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from broker.metrics import BrokerMetrics
from broker.share.ack_job import STEP_RUNS
from broker.share.ack_job import AckJob
from broker.share.ack_job import Phase
from broker.share.acknowledgements import AckOutcome
from broker.share.acknowledgements import apply
from broker.share.acknowledgements import begin
from broker.share.acknowledgements import outcome
from broker.share.acknowledgements import past_window
from broker.share.persister import PersistedState
from broker.share.persister import ShareChange
from broker.share.record_state import AcknowledgeType
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_partition import SharePartitionKey
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_state_persister import ShareStatePersister
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import build_batch
from storage.errors import KafkaStorageError
from storage.memory_log import MemoryLogs

GAP, ACCEPT, RELEASE, REJECT, RENEW = (int(t) for t in AcknowledgeType)
ACQUIRED, ACKNOWLEDGED = RecordState.ACQUIRED, RecordState.ACKNOWLEDGED
BIG = 5 * STEP_RUNS + 7  # records of the big batch: 6 slices of runs
LOCK_MS = 30_000


@dataclass(frozen=True)
class Batch:
    """An acknowledgement batch as the protocol carries it."""

    first_offset: int
    last_offset: int
    acknowledge_types: Sequence[int]


class Writes:
    """The real persister, counting writes, and failing them on demand (a full disk)."""

    def __init__(self, inner: ShareStatePersister) -> None:
        self.inner = inner
        self.count = 0
        self.fail = False

    def initialise(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        self.inner.initialise(key, start_offset, now_ms)

    def read(
        self, key: SharePartitionKey, log_start_offset: int, now_ms: int
    ) -> PersistedState | None:
        return self.inner.read(key, log_start_offset, now_ms)

    def write(self, key: SharePartitionKey, change: ShareChange, now_ms: int) -> int | None:
        if self.fail:
            raise KafkaStorageError("disk full")
        self.count += bool(change.ranges)
        return self.inner.write(key, change, now_ms)

    def delete(self, key: SharePartitionKey, start_offset: int, now_ms: int) -> None:
        self.inner.delete(key, start_offset, now_ms)

    def has_state(self, key: SharePartitionKey) -> bool:
        return self.inner.has_state(key)

    def groups(self) -> set[str]:
        return self.inner.groups()

    def recorded(self) -> list[SharePartitionKey]:
        return self.inner.recorded()

    def forget_topic(self, topic: str, topic_id: uuid.UUID) -> None:
        self.inner.forget_topic(topic, topic_id)


class Broker:
    """Topic "t": partition 0 holds one batch of BIG records then one of 10 (the window has
    room for both); partition 1 is never fetched (its share-partition is not loaded)."""

    def __init__(self) -> None:
        self.logs = MemoryLogs()
        self.topic = self.logs.create_topic("t", 2)
        plog = self.logs.log("t", 0)
        assert plog is not None
        for count in (BIG, 10):
            plog.append(build_batch([(None, b"")] * count, timestamp_ms=1), now_ms=1)
        configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        configs.alter(
            "G",
            {"share.auto.offset.reset": "earliest", "share.partition.max.record.locks": "4000"},
        )
        self.writes = Writes(ShareStatePersister(self.logs))
        self.manager = SharePartitionManager(
            self.logs, configs, persister=self.writes, metrics=BrokerMetrics()
        )
        self.key = (self.topic.topic_id, 0)

    def fetch(self, member: str, now: int = 0, max_records: int = 500) -> list[tuple[int, int]]:
        got = self.manager.fetch(
            "G", member, self.topic.topic_id, 0, max_bytes=1 << 24, max_records=max_records,
            now_ms=now,
        )  # fmt: skip
        return [(a.first_offset, a.last_offset) for a in got.acquired]

    def begin(
        self, member: str, batches: Sequence[Batch], *, partition: int = 0, v2: bool = True
    ) -> AckJob | AckOutcome:
        return begin(
            self.manager, "G", member, (self.topic.topic_id, partition), [batches],
            renew_allowed=v2, now_ms=1,
        )  # fmt: skip

    def job(self, member: str, batches: Sequence[Batch]) -> AckJob:
        job = self.begin(member, batches)
        assert isinstance(job, AckJob)
        return job

    def partition(self) -> SharePartition:
        sp = self.manager.get("G", self.topic.topic_id, 0, 0)
        assert sp is not None
        return sp

    def states(self, first: int, last: int) -> set[RecordState]:
        sp = self.partition()
        return {sp.state_of(o)[0] for o in range(first, last + 1)}


def answer(started: AckJob | AckOutcome) -> AckOutcome:
    """What the request is answered: at once, or once its job is stepped to its end."""
    if isinstance(started, AckOutcome):
        return started
    started.run_to_end()
    return outcome(started)


def one_by_one(first: int, last: int) -> list[Batch]:
    """librdkafka acknowledging each record on its own, alternately ACCEPT and REJECT."""
    return [Batch(o, o, [ACCEPT if o % 2 == 0 else REJECT]) for o in range(first, last + 1)]


def test_a_small_acknowledgement_is_done_at_once() -> None:
    """Nearly every acknowledgement: done in one go (no job for the caller to step), and a
    job of that size is done in its first step."""
    b = Broker()
    assert b.fetch("A") == [(0, BIG - 1)]  # the batch holding the 500th record, whole
    assert b.begin("A", one_by_one(0, STEP_RUNS - 1)) == AckOutcome(ErrorCode.none)
    assert b.partition().spso == STEP_RUNS
    job = b.manager.begin_acknowledge(
        "G", "A", b.topic.topic_id, 0,
        [(o, o, [ACCEPT]) for o in range(STEP_RUNS, 2 * STEP_RUNS - 1)], 1,
    )  # fmt: skip
    assert isinstance(job, AckJob) and job.step()
    assert (job.outcome, job.steps) == (ErrorCode.none, 1)
    assert b.partition().spso == 2 * STEP_RUNS - 1  # all of both done


def test_a_big_acknowledgement_is_planned_written_once_and_applied_a_slice_at_a_time() -> None:
    b = Broker()
    b.fetch("A")
    sp = b.partition()
    job = b.job("A", one_by_one(0, BIG - 1))
    done_before = 0
    phases = []
    while not job.step():
        phases.append(job.phase)
        done = sum(sp.state_of(o)[0] is not ACQUIRED for o in range(BIG))
        # Nothing moves before the write; then at most one slice of runs per step.
        assert done == 0 if job.phase in (Phase.PARSE, Phase.PLAN, Phase.WRITE) else True
        assert done - done_before <= STEP_RUNS
        done_before = done
    assert job.outcome == ErrorCode.none
    assert b.writes.count == 1  # one SHARE_DELTA for the whole request
    slices = -(-BIG // STEP_RUNS)
    assert job.steps == 3 * slices + 1  # parse, plan and apply a slice a step; one write
    assert phases.count(Phase.APPLY) == slices
    assert (sp.spso, sp.in_flight_count()) == (BIG, 0)  # all done: the window moved past


@pytest.mark.parametrize(
    ("last", "code"),
    [
        (Batch(BIG + 3, BIG + 2, [ACCEPT]), ErrorCode.invalid_request),  # first > last
        (Batch(BIG + 3, BIG + 3, [ACCEPT]), ErrorCode.invalid_record_state),  # not held
    ],
)
def test_one_bad_batch_at_the_end_refuses_the_whole_request(last: Batch, code: ErrorCode) -> None:
    """All or none: the bad batch is met steps after the first ones were checked."""
    b = Broker()
    b.fetch("A")
    b.fetch("B", max_records=10)  # holds BIG..BIG+9: the window has room for the last batch
    job = b.job("A", [*one_by_one(0, BIG - 1), last])
    assert job.run_to_end() == code
    assert job.steps > 1
    assert b.states(0, BIG - 1) == {ACQUIRED}
    assert b.writes.count == 0


def test_a_failed_write_changes_nothing() -> None:
    b = Broker()
    b.fetch("A")
    b.writes.fail = True
    job = b.job("A", one_by_one(0, BIG - 1))
    assert job.run_to_end() == ErrorCode.kafka_storage_error
    assert b.states(0, BIG - 1) == {ACQUIRED}
    b.writes.fail = False  # the same acknowledgement goes through once the disk has room
    assert b.job("A", one_by_one(0, BIG - 1)).run_to_end() == ErrorCode.none


def test_the_rule_counts_entries_against_the_records_in_flight() -> None:
    b = Broker()
    b.fetch("A")
    window = b.partition().in_flight_count()
    assert window == BIG
    # As many entries as records in flight: a client can hold that many.
    assert past_window(window, [one_by_one(0, BIG - 1)]) is None
    assert past_window(window, [[Batch(0, BIG - 1, [ACCEPT] * BIG)]]) is None
    # One more, in ranges or in a per-offset types list: they reach past the window.
    for listed in ([one_by_one(0, BIG)], [[Batch(0, BIG, [ACCEPT] * (BIG + 1))]]):
        refused = b.begin("A", listed[0])
        assert isinstance(refused, AckOutcome)
        assert refused.error_code == ErrorCode.invalid_request
        assert refused.message and f"{BIG} records in flight" in refused.message
    assert b.states(0, BIG - 1) == {ACQUIRED}
    # Listed twice: both listings count.
    assert past_window(window, [one_by_one(0, BIG - 1), one_by_one(0, 0)]) is not None


def test_a_share_partition_not_loaded_is_checked_in_steps_not_refused() -> None:
    """Nothing is held there: GAPs alone change nothing, anything else is
    INVALID_RECORD_STATE, a malformed request INVALID_REQUEST, however many entries."""
    b = Broker()
    assert not b.manager.partitions_of("G")  # nothing loaded
    gaps = [Batch(o, o, [GAP]) for o in range(BIG)]
    job = b.begin("A", gaps, partition=1)
    assert isinstance(job, AckJob)
    assert (job.run_to_end(), job.steps > 1) == (ErrorCode.none, True)
    job = b.begin("A", [*gaps, Batch(BIG, BIG, [ACCEPT])], partition=1)
    assert isinstance(job, AckJob) and job.run_to_end() == ErrorCode.invalid_record_state
    job = b.begin("A", [*gaps, Batch(BIG, BIG, [9])], partition=1)
    assert isinstance(job, AckJob) and job.run_to_end() == ErrorCode.invalid_request


def test_listings_merge_in_offset_order_and_renew_needs_v2() -> None:
    b = Broker()
    b.fetch("A")
    two = apply(
        b.manager, "G", "A", b.key, [one_by_one(10, 19), one_by_one(0, 9)],
        renew_allowed=True, now_ms=1,
    )  # fmt: skip
    assert two.error_code == ErrorCode.none
    assert b.states(0, 19) <= {ACKNOWLEDGED, RecordState.ARCHIVED}
    unsorted = [Batch(30, 30, [ACCEPT]), Batch(20, 20, [ACCEPT])]
    assert answer(b.begin("A", unsorted)).error_code == ErrorCode.invalid_request  # as KafkaApis
    renew = answer(b.begin("A", [Batch(20, 20, [RENEW])], v2=False))
    assert renew == AckOutcome(ErrorCode.invalid_request, "RENEW needs version 2")
    # The same in a big one (done in steps).
    big = [*one_by_one(20, 20 + STEP_RUNS), Batch(BIG - 1, BIG - 1, [RENEW])]
    assert answer(b.begin("A", big, v2=False)) == renew
    assert answer(b.begin("A", [*big[1:], *unsorted])).error_code == ErrorCode.invalid_request
    assert b.states(20, BIG - 1) == {ACQUIRED}


def test_lock_expiry_waits_for_a_job_then_expires_what_it_left() -> None:
    b = Broker()
    b.fetch("A")
    job = b.job("A", one_by_one(0, BIG - 11))  # the last 10 of the batch stay held
    job.step()
    assert b.manager.expire_locks(LOCK_MS + 1) == 0  # due, but the job is in progress
    assert b.states(0, BIG - 1) == {ACQUIRED}
    assert job.run_to_end() == ErrorCode.none
    assert b.manager.expire_locks(LOCK_MS + 2) == 10  # re-armed when the job ended
    assert b.states(BIG - 10, BIG - 1) == {RecordState.AVAILABLE}


def test_a_departure_during_a_job_is_released_after_it() -> None:
    b = Broker()
    b.fetch("A")
    assert b.fetch("B", max_records=10) == [(BIG, BIG + 9)]
    job = b.job("A", one_by_one(0, BIG - 1))
    job.step()
    assert b.manager.release_member("G", "B", 2) == 0  # deferred
    assert b.states(BIG, BIG + 9) == {ACQUIRED}
    job.run_to_end()
    assert b.states(BIG, BIG + 9) == {RecordState.AVAILABLE}


def test_a_fetch_may_acquire_between_steps_and_admin_changes_finish_the_job_first() -> None:
    b = Broker()
    b.fetch("A")
    job = b.job("A", one_by_one(0, BIG - 1))
    while job.phase is not Phase.APPLY:
        job.step()
    job.step()  # part applied
    assert b.fetch("B", max_records=10) == [(BIG, BIG + 9)]  # new records: no plan covers them
    b.manager.delete("G", b.topic.topic_id, 0, 3)  # DeleteShareGroupOffsets cannot wait
    assert (job.done, job.outcome) == (True, ErrorCode.none)
    assert b.writes.count == 1  # the job's delta; the tombstone came after it


def test_a_job_begun_before_the_share_partition_was_loaded_releases_departures_after_it() -> None:
    b = Broker()
    job = b.begin("A", [Batch(o, o, [GAP]) for o in range(BIG)])  # nothing loaded yet
    assert isinstance(job, AckJob)
    job.step()
    assert b.fetch("B") == [(0, BIG - 1)]  # loads it meanwhile
    assert b.manager.release_member("G", "B", 2) == 0  # held back by the job all the same
    assert job.run_to_end() == ErrorCode.none
    assert b.states(0, BIG - 1) == {RecordState.AVAILABLE}
