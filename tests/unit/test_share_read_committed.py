"""share.isolation.level=read_committed over a bare ShareWindow and each acquisition policy.

Kafka's `SharePartition.acquire` reads a read_committed group's log only up to the LSO
(`FetchIsolation.TXN_COMMITTED`), then archives the acquired records of aborted transactions
(`maybeFilterAbortedTransactionalAcquiredRecords`, by each batch's producer id against the
fetch's aborted transactions); `GroupConfig.SHARE_ISOLATION_LEVEL_CONFIG` is the setting,
read_uncommitted by default. Here the bound is `Fetch.committed`, applied by the one span walk
every policy makes (`ShareWindow.walk`); each batch is judged by its header, never its records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from broker.share import partition_reads
from broker.share.acquire.batch_optimized import BATCH_OPTIMIZED
from broker.share.acquire.key_ordered import KeyOrdered
from broker.share.acquire.policy import AcquisitionPolicy
from broker.share.acquire.policy import Fetch
from broker.share.acquire.policy import KeyHashes
from broker.share.acquire.record_limit import RECORD_LIMIT
from broker.share.limits import ShareLimits
from broker.share.record_state import RecordState
from broker.share.share_partition import SharePartition
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ReadCommitted
from broker.share.window import ShareWindow
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from coordinator.group_configs import InvalidGroupConfig
from protocol.record_batch import TRANSACTIONAL_MASK
from protocol.record_batch import build_batch
from storage.log import BatchSpan as StoredSpan
from storage.memory_log import MemoryLogs

AVAILABLE = RecordState.AVAILABLE
ARCHIVED = RecordState.ARCHIVED

P, Q = 7, 8  # two transactional producers


def data(first: int, last: int, producer: int = -1) -> BatchSpan:
    return BatchSpan(first, last, False, producer)


def marker(offset: int, producer: int) -> BatchSpan:
    return BatchSpan(offset, offset, True, producer)


def fetch(spans: list[BatchSpan], committed: ReadCommitted | None, max_records: int = 500) -> Fetch:
    # Key-ordered groups come with the key of every offset: here all null (unordered).
    keys = {o: None for s in spans for o in range(s.base_offset, s.last_offset + 1)}
    return Fetch(
        "m", spans, 0, max_records, now_ms=0, deadline=30_000, max_record_locks=1000,
        keys=keys, committed=committed,
    )  # fmt: skip


def offsets(out: list[AcquiredRecords]) -> list[int]:
    return [o for a in out for o in range(a.first_offset, a.last_offset + 1)]


POLICIES = ("batch_optimized", "record_limit", "key_ordered")


def policy(name: str) -> AcquisitionPolicy:
    if name == "key_ordered":
        return KeyOrdered(0)  # one per window: it keeps state across fetches
    return {"batch_optimized": BATCH_OPTIMIZED, "record_limit": RECORD_LIMIT}[name]


@pytest.mark.parametrize("name", POLICIES)
def test_acquisition_stops_at_the_lso_and_what_follows_waits(name: str) -> None:
    """An open transaction of P at 3-5 holds the LSO at 3: records 0-2 go, the rest (P's
    open batch and the committed-looking plain batch after it) wait, untouched: not in the
    window, not archived."""
    w, p = ShareWindow(0), policy(name)
    spans = [data(0, 2), data(3, 5, P), data(6, 9)]
    assert offsets(p.acquire(w, fetch(spans, ReadCommitted(3, {})))) == [0, 1, 2]
    assert w.end == 3
    # The same spans once the transaction commits (marker at 10, LSO at the log end).
    spans.append(marker(10, P))
    out = p.acquire(w, fetch(spans, ReadCommitted(11, {})))
    assert offsets(out) == [3, 4, 5, 6, 7, 8, 9]
    assert w.end == 11 and w.state_of(10) == (ARCHIVED, 0)  # the marker, never handed out


@pytest.mark.parametrize("name", POLICIES)
def test_aborted_batches_are_archived_and_others_between_them_delivered(name: str) -> None:
    """P's transaction 0-7 aborts (marker at 8) with Q's committed batch 2-3 and a plain batch
    4-4 inside its range: P's batches 0-1 and 5-7 are archived, Q's and the plain one go;
    Q's marker at 9 and P's at 8 are archived as every control batch is."""
    w, p = ShareWindow(0), policy(name)
    spans = [
        data(0, 1, P), data(2, 3, Q), data(4, 4), data(5, 7, P), marker(8, P), marker(9, Q),
        data(10, 11),
    ]  # fmt: skip
    committed = ReadCommitted(12, {P: [(0, 8)]})
    assert offsets(p.acquire(w, fetch(spans, committed))) == [2, 3, 4, 10, 11]
    assert w.start == 2  # SPSO passed the archived 0-1 as past acknowledged records
    for offset in (5, 6, 7, 8, 9):
        assert w.state_of(offset) == (ARCHIVED, 0)
    assert w.take_changes() == []  # the aborted index says it again after a restart


@pytest.mark.parametrize("name", POLICIES)
def test_read_uncommitted_delivers_aborted_data_but_never_a_marker(name: str) -> None:
    w, p = ShareWindow(0), policy(name)
    spans = [data(0, 1, P), marker(2, P), data(3, 4, Q)]
    assert offsets(p.acquire(w, fetch(spans, None))) == [0, 1, 3, 4]
    assert w.state_of(2) == (ARCHIVED, 0)


def test_a_producers_later_transaction_is_not_aborted_by_its_earlier_one() -> None:
    """P aborted 0-2 (marker 2), then committed 3-5 (marker 5): only the first is aborted."""
    w = ShareWindow(0)
    spans = [data(0, 1, P), marker(2, P), data(3, 4, P), marker(5, P)]
    out = BATCH_OPTIMIZED.acquire(w, fetch(spans, ReadCommitted(6, {P: [(0, 2)]})))
    assert offsets(out) == [3, 4]


def test_records_released_before_the_switch_to_read_committed_are_archived_if_aborted() -> None:
    """Changing the config applies to later acquisitions: P's aborted batch, acquired under
    read_uncommitted and released since (AVAILABLE again), is archived by the next
    read_committed fetch instead of going out again."""
    w = ShareWindow(0)
    spans = [data(0, 1, P), marker(2, P), data(3, 4)]
    assert offsets(BATCH_OPTIMIZED.acquire(w, fetch(spans, None))) == [0, 1, 3, 4]
    w.finish(0, 4, lambda b: AVAILABLE if b.state is RecordState.ACQUIRED else None)
    w.take_changes()
    again = BATCH_OPTIMIZED.acquire(w, fetch(spans, ReadCommitted(5, {P: [(0, 2)]})))
    assert offsets(again) == [3, 4]
    assert w.start == 3


def test_the_cap_on_records_still_holds_below_the_lso() -> None:
    w = ShareWindow(0)
    spans = [data(0, 4), data(5, 9), data(10, 14, P)]
    out = RECORD_LIMIT.acquire(w, fetch(spans, ReadCommitted(10, {}), max_records=7))
    assert offsets(out) == list(range(7))
    out = RECORD_LIMIT.acquire(w, fetch(spans, ReadCommitted(10, {}), max_records=7))
    assert offsets(out) == [7, 8, 9] and w.end == 10


def test_share_partition_hands_the_bound_to_its_policy() -> None:
    limits = ShareLimits(5, 1000, 30_000, True, read_committed=True)
    sp = SharePartition("g", uuid.uuid4(), 0, start_offset=0, limits=lambda: limits)
    assert sp.read_committed
    spans = [data(0, 2, P), marker(3, P), data(4, 6, Q)]  # Q's transaction still open
    committed = ReadCommitted(4, {P: [(0, 3)]})
    assert sp.acquire("m", spans, max_records=500, now_ms=0, committed=committed) == []
    assert sp.spso == 4 and sp.next_fetch_offset() == 4


def test_share_isolation_level_is_a_bounded_group_config() -> None:
    defaults = {name: default for name, (default, _) in BROKER_DEFAULTS.items()}
    configs = GroupConfigs(None, defaults.__getitem__)
    assert configs.effective("g", "share.isolation.level") == "read_uncommitted"
    assert not configs.share("g").read_committed
    configs.alter("g", {"share.isolation.level": "read_committed"})
    assert configs.share("g").read_committed
    with pytest.raises(InvalidGroupConfig, match="read_uncommitted, read_committed"):
        configs.alter("g", {"share.isolation.level": "hello"})
    assert ("share.isolation.level", "read_committed", True) in configs.describe("g")


# ----------------------------------------------- through the manager, over an in-memory log


class Txns:
    """Topic "t", one partition, written as a transactional producer would (producer state,
    LSO and aborted index kept by the log itself), read by group "G" through the manager."""

    def __init__(self, *, isolation: str, ordered: bool = False) -> None:
        self.logs = MemoryLogs()
        self.topic = self.logs.create_topic("t", 1)
        plog = self.logs.log("t", 0)
        assert plog is not None
        self.plog = plog
        self.seq: dict[int, int] = {}
        configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        configs.alter("G", {
            "share.auto.offset.reset": "earliest", "share.isolation.level": isolation,
            "share.key.ordering.enable": str(ordered).lower(),
        })  # fmt: skip
        self.manager = SharePartitionManager(self.logs, configs)

    def send(self, producer: int, *keys: bytes) -> None:
        """One batch of `keys` (-1: not transactional)."""
        if producer < 0:
            self.plog.append(build_batch([(k, b"v") for k in keys], timestamp_ms=1), now_ms=1)
            return
        seq = self.seq.get(producer, 0)
        self.seq[producer] = seq + len(keys)
        batch = build_batch(
            [(k, b"v") for k in keys], timestamp_ms=1, producer_id=producer, producer_epoch=0,
            base_sequence=seq, attributes=TRANSACTIONAL_MASK,
        )  # fmt: skip
        self.plog.append(batch, now_ms=1)

    def end(self, producer: int, commit: bool) -> None:
        self.plog.append_marker(producer, 0, commit, now_ms=1)

    def fetch(self, now: int = 0) -> list[int]:
        got = self.manager.fetch(
            "G", "M", self.topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=now
        )
        return offsets(got.acquired)


@pytest.mark.parametrize("ordered", [False, True])
def test_the_manager_reads_up_to_the_lso_and_skips_aborted_batches(ordered: bool) -> None:
    t = Txns(isolation="read_committed", ordered=ordered)
    t.send(P, b"a", b"b")  # 0-1, aborted below
    t.send(Q, b"c")  # 2, committed below
    t.send(-1, b"d")  # 3
    t.end(P, commit=False)  # 4
    t.send(P, b"e")  # 5: P's next transaction, left open: the LSO
    t.send(-1, b"f")  # 6
    assert t.fetch() == []  # Q's transaction, open, holds the LSO at 2
    t.end(Q, commit=True)  # 7
    assert t.fetch() == [2, 3]  # 0-1 archived, 4 a marker; P's open one holds the LSO at 5
    t.end(P, commit=True)  # 8
    assert t.fetch() == [5, 6]


def test_a_key_ordered_group_decodes_nothing_past_the_lso(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[list[int]] = []
    real = partition_reads.key_hashes

    def recording(data: bytes, spans: Sequence[StoredSpan]) -> KeyHashes:
        decoded.append([s.base_offset for s in spans])
        return real(data, spans)

    monkeypatch.setattr(partition_reads, "key_hashes", recording)
    t = Txns(isolation="read_committed", ordered=True)
    t.send(-1, b"a")  # 0
    t.send(P, b"b")  # 1: open
    t.send(-1, b"c")  # 2
    assert t.fetch() == [0]
    assert decoded == [[0]]


def test_read_uncommitted_through_the_manager_gets_aborted_and_open_records() -> None:
    t = Txns(isolation="read_uncommitted")
    t.send(P, b"a", b"b")  # 0-1
    t.end(P, commit=False)  # 2
    t.send(Q, b"c")  # 3: open
    assert t.fetch() == [0, 1, 3]
