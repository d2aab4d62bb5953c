"""Scheduled delivery (issue 35, topic config `shoal.scheduled.delivery.enable`): a record with
the header `shoal.deliver.at.ms` is not acquired before that time, on such topics only.

Through the share-partition manager over in-memory logs (the fetch path that reads headers:
`partition_reads` and `deliver_at.py`), and the policy over a bare window.
"""

from __future__ import annotations

import pytest

from broker.share import partition_reads
from broker.share.acquire.batch_optimized import BATCH_OPTIMIZED
from broker.share.acquire.policy import Fetch
from broker.share.acquire.scheduled import Scheduled
from broker.share.deliver_at import MAX_AHEAD_MS
from broker.share.deliver_at import parse_time
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.window import AcquiredRecords
from broker.share.window import BatchSpan
from broker.share.window import ShareWindow
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.records import header_values
from storage.memory_log import MemoryLogs

HEADER = b"shoal.deliver.at.ms"
T0 = 1_800_000_000_000  # "now" in these tests (epoch ms)


def offsets(out: list[AcquiredRecords]) -> list[int]:
    return [o for a in out for o in range(a.first_offset, a.last_offset + 1)]


def at(ms: int | bytes) -> NewRecord:
    value = ms if isinstance(ms, bytes) else str(ms).encode()
    return NewRecord(None, b"v", [(b"other", b"x"), (HEADER, value)])


PLAIN = NewRecord(None, b"v")


class Topic:
    def __init__(self, scheduled: bool = True, **group: str) -> None:
        self.logs = MemoryLogs()
        configs = {"shoal.scheduled.delivery.enable": str(scheduled).lower()}
        self.topic = self.logs.create_topic("t", 1, configs=configs)
        plog = self.logs.log("t", 0)
        assert plog is not None
        self.plog = plog
        self.configs = GroupConfigs(None, lambda name: BROKER_DEFAULTS[name][0])
        self.configs.alter("G", {"share.auto.offset.reset": "earliest", **group})
        self.manager = SharePartitionManager(self.logs, self.configs)

    def send(self, *records: NewRecord) -> None:
        self.plog.append(build_batch(list(records), timestamp_ms=1), now_ms=1)

    def fetch(self, now: int, member: str = "M") -> list[AcquiredRecords]:
        got = self.manager.fetch(
            "G", member, self.topic.topic_id, 0, max_bytes=1 << 20, max_records=500, now_ms=now
        )
        return got.acquired


def test_the_header_is_read_past_keys_values_and_other_headers() -> None:
    batch = build_batch([at(5), PLAIN, NewRecord(b"k", None, [(HEADER, None)]), at(7)],
                        timestamp_ms=1, base_offset=10)  # fmt: skip
    assert header_values(batch, HEADER) == [(10, b"5"), (12, None), (13, b"7")]


def test_bad_values_parse_as_no_time() -> None:
    assert parse_time(b"1800000000000") == 1_800_000_000_000
    for bad in (None, b"", b"-5", b"1.5e12", b" 12", b"\xd9\xa1", b"1" * 20):
        assert parse_time(bad) is None, bad


def test_a_scheduled_record_waits_and_its_batch_is_split_around_it() -> None:
    t = Topic()
    t.send(PLAIN, at(T0 + 5000), PLAIN, PLAIN)  # one batch, 0-3
    t.send(PLAIN)  # 4
    assert t.fetch(T0) == [AcquiredRecords(0, 0, 1), AcquiredRecords(2, 4, 1)]
    sp = t.manager.loaded("G", t.topic.topic_id, 0)
    assert sp is not None and sp.delayed_count(T0) == 1 and sp.next_wait(T0) == T0 + 5000
    assert t.fetch(T0 + 4999) == []
    assert t.fetch(T0 + 5000) == [AcquiredRecords(1, 1, 1)]  # a first delivery


@pytest.mark.parametrize("value", [b"soon", b"-1", str(T0 + MAX_AHEAD_MS + 1).encode(), b"5"])
def test_a_bad_past_or_too_distant_time_is_delivered_now(value: bytes) -> None:
    t = Topic()
    t.send(at(value), PLAIN)
    assert offsets(t.fetch(T0)) == [0, 1]


def test_other_topics_never_read_the_header() -> None:
    t = Topic(scheduled=False)
    t.send(at(T0 + 5000), PLAIN)
    assert offsets(t.fetch(T0)) == [0, 1]


@pytest.mark.parametrize(
    "group",
    [{}, {"share.acquire.mode": "record_limit"}, {"share.key.ordering.enable": "true"}],
    ids=["batch_optimized", "record_limit", "key_ordered"],
)
def test_every_policy_keeps_the_schedule(group: dict[str, str]) -> None:
    t = Topic(**group)
    t.send(at(T0 + 100), at(T0 + 100), PLAIN)
    assert offsets(t.fetch(T0)) == [2]
    assert offsets(t.fetch(T0 + 100)) == [0, 1]


def test_after_a_restart_the_window_reads_the_times_again() -> None:
    """The times are not share state: a share-partition restored with the scheduled records
    inside its window (AVAILABLE, count 0) holds them again from the headers."""
    t = Topic()
    t.send(PLAIN, at(T0 + 5000), PLAIN)
    assert offsets(t.fetch(T0)) == [0, 2]
    sp = t.manager.loaded("G", t.topic.topic_id, 0)
    assert sp is not None
    sp.restore(0, 3, [])  # as recovery finds it: 0-2 AVAILABLE, never delivered
    assert offsets(t.fetch(T0 + 1)) == [0, 2]
    assert offsets(t.fetch(T0 + 5000)) == [1]


def test_the_policy_places_waits_up_to_the_record_lock_cap() -> None:
    """Waiting records count against max_record_locks: a window full of them takes nothing
    past them until the earliest is due."""
    w, schedule = ShareWindow(0), Scheduled(0)
    spans = [BatchSpan(0, 99, False), BatchSpan(100, 199, False)]
    waits = {o: T0 + 1000 for o in range(100)}
    fetch = Fetch("m", spans, 0, 500, T0, T0 + 30_000, 100, deliver_at=waits)
    assert schedule.acquire(w, fetch, BATCH_OPTIMIZED) == []
    assert w.end == 100 and w.waiting(T0) == 100
    later = Fetch("m", spans, 0, 500, T0 + 1000, T0 + 31_000, 100, deliver_at={})
    assert offsets(schedule.acquire(w, later, BATCH_OPTIMIZED)) == list(range(100))


def test_a_fetch_decodes_a_bounded_number_of_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most SCHEDULE_DECODE_RECORDS records' headers per fetch (the first batch whole):
    the rest waits for the next fetch, never acquired without its header read."""
    monkeypatch.setattr(partition_reads, "SCHEDULE_DECODE_RECORDS", 3)
    t = Topic()
    t.send(PLAIN, PLAIN)  # 0-1
    t.send(PLAIN, PLAIN)  # 2-3: past the budget
    t.send(at(T0 + 10), PLAIN)  # 4-5
    assert offsets(t.fetch(T0)) == [0, 1]
    assert offsets(t.fetch(T0)) == [2, 3]
    assert offsets(t.fetch(T0)) == [5]  # 4 waits
    assert offsets(t.fetch(T0 + 10)) == [4]
