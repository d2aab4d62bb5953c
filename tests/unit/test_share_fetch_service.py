"""ShareFetchService without sockets: share sessions, rotation across partitions, record and
byte budgets, acknowledgements and departures, with time passed in."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.share.share_fetch_service import LEAVE_GRACE_MS
from broker.share.share_fetch_service import ShareFetchService
from broker.share.share_partition_manager import SharePartitionManager
from broker.share.share_session_cache import ShareSession
from broker.share.share_session_cache import ShareSessionCache
from broker.share.share_session_cache import ShareSessionError
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import GroupConfigs
from coordinator.share_group import Departure
from protocol.record_batch import build_batch
from storage.log_manager import LogManager

G, M = "G", "member-a"
NOW = 1_000_000
ACCEPT = 1


class Batch:
    """An acknowledgement batch as the protocol carries it."""

    def __init__(self, first: int, last: int, *types: int) -> None:
        self.first_offset, self.last_offset, self.acknowledge_types = first, last, types


class World:
    """A real log manager and share-partition manager in a temporary directory."""

    def __init__(self, tmp_path: Path, partitions: int, records_each: int) -> None:
        self.logs = LogManager(tmp_path)
        configs = GroupConfigs(
            tmp_path / "group-configs.json", lambda name: BROKER_DEFAULTS[name][0]
        )
        configs.alter(G, {"share.auto.offset.reset": "earliest"})
        self.members = {(G, M)}
        self.topic_id = self.logs.create_topic("t", partitions, {}).topic_id
        for p in range(partitions):
            plog = self.logs.log("t", p)
            assert plog is not None
            for _ in range(records_each):  # one record per batch: budgets cut between batches
                plog.append(build_batch([(None, b"x" * 100)], timestamp_ms=1), now_ms=1)
        self.partitions = SharePartitionManager(self.logs, configs)
        self.service = ShareFetchService(
            ShareSessionCache(10),
            self.partitions,
            is_member=lambda g, m: (g, m) in self.members,
            topic_of=self.topic_of,
        )

    def topic_of(self, topic_id: uuid.UUID) -> tuple[uuid.UUID, int] | None:
        topic = self.logs.topic_by_id(topic_id)
        return (topic.topic_id, topic.partitions) if topic else None

    def open(self, partitions: range) -> ShareSession:
        update = self.service.update_session(G, M, 0, [(self.topic_id, p) for p in partitions], [])
        assert update.session is not None and not update.unknown
        return update.session

    def held(self) -> int:
        return sum(sp.acquired_count() for sp in self.partitions.partitions().values())


def test_a_session_is_opened_only_by_a_member(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 1)
    w.members.clear()
    with pytest.raises(ShareSessionError) as e:
        w.service.update_session(G, M, 0, [(w.topic_id, 0)], [])
    assert e.value.error_code == ErrorCode.unknown_member_id


def test_epochs_advance_one_by_one_across_fetch_and_acknowledge(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 1)
    w.open(range(1))
    with pytest.raises(ShareSessionError) as e:
        w.service.update_session(G, M, 2, [], [])
    assert e.value.error_code == ErrorCode.invalid_share_session_epoch
    assert w.service.update_session(G, M, 1, [], []).session is not None
    w.service.advance_for_acknowledge(G, M, 2)
    assert w.service.update_session(G, M, 3, [], []).session is not None
    with pytest.raises(ShareSessionError) as e:
        w.service.update_session("other", M, 1, [], [])
    assert e.value.error_code == ErrorCode.share_session_not_found


def test_acknowledge_never_opens_a_session_and_close_needs_none(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 1)
    with pytest.raises(ShareSessionError) as e:
        w.service.advance_for_acknowledge(G, M, 0)
    assert e.value.error_code == ErrorCode.invalid_share_session_epoch
    w.service.advance_for_acknowledge(G, M, -1)  # closing acks come after the member left
    assert w.service.update_session(G, M, -1, [], []).session is None


def test_unknown_partitions_are_answered_once_and_never_kept(tmp_path: Path) -> None:
    w = World(tmp_path, 2, 1)
    stranger = uuid.uuid4()
    update = w.service.update_session(
        G, M, 0, [(w.topic_id, 0), (w.topic_id, 5), (stranger, 0)], []
    )
    assert update.session is not None
    assert list(update.session.partitions) == [(w.topic_id, 0)]
    assert {k: f.error_code for k, f in update.unknown.items()} == {
        (w.topic_id, 5): ErrorCode.unknown_topic_or_partition,
        (stranger, 0): ErrorCode.unknown_topic_id,
    }
    forgotten = w.service.update_session(G, M, 1, [(w.topic_id, 1)], [(w.topic_id, 0)])
    assert forgotten.session is not None
    assert list(forgotten.session.partitions) == [(w.topic_id, 1)]


def test_each_epoch_starts_one_partition_further(tmp_path: Path) -> None:
    """Kafka's `PartitionRotateStrategy` (round robin, KAFKA-17951): the session's partitions
    turned left by the request's epoch, not at all at epoch 0; an epoch a ShareAcknowledge
    used still counts, so the order follows the epoch, not the number of fetches."""
    w = World(tmp_path, 3, 5)
    session = w.open(range(3))
    firsts = []
    for epoch in (0, 1, 2, 3, 5):  # 4: a ShareAcknowledge's
        fetched = w.service.acquire(
            session, session_epoch=epoch, max_records=1, max_bytes=1 << 20, now_ms=NOW
        )
        assert len(fetched) == 1
        firsts.append(next(iter(fetched))[1])
    assert firsts == [0, 1, 2, 0, 2]


def test_max_bytes_is_shared_evenly_by_the_partitions(tmp_path: Path) -> None:
    """Kafka's `PartitionMaxBytesStrategy` UNIFORM (KAFKA-18404): each partition that can
    acquire reads at most MaxBytes / their number, so one partition's backlog does not take a
    whole response while the others wait."""
    w = World(tmp_path, 2, 4)
    plog = w.logs.log("t", 0)
    assert plog is not None
    batch = len(plog.read(0, 1))  # one stored batch (one record)
    session = w.open(range(2))
    fetched = w.service.acquire(
        session, session_epoch=0, max_records=500, max_bytes=4 * batch, now_ms=NOW
    )
    counts = {
        k[1]: sum(a.last_offset - a.first_offset + 1 for a in f.acquired)
        for k, f in fetched.items()
    }
    assert counts == {0: 2, 1: 2}
    assert sum(len(f.records) for f in fetched.values()) == 4 * batch


def test_the_record_budget_is_shared_by_the_partitions(tmp_path: Path) -> None:
    w = World(tmp_path, 3, 4)
    session = w.open(range(3))
    fetched = w.service.acquire(
        session, session_epoch=0, max_records=6, max_bytes=1 << 20, now_ms=NOW
    )
    counts = [sum(a.last_offset - a.first_offset + 1 for a in f.acquired) for f in fetched.values()]
    assert counts == [4, 2]
    assert w.held() == 6


def test_the_byte_budget_stops_acquisition(tmp_path: Path) -> None:
    w = World(tmp_path, 3, 4)
    session = w.open(range(3))
    fetched = w.service.acquire(session, session_epoch=0, max_records=500, max_bytes=1, now_ms=NOW)
    # The first partition's first batch comes whole (KIP-74), then the byte budget is spent.
    assert len(fetched) == 1
    assert sum(len(f.acquired) for f in fetched.values()) == 1
    assert w.held() == 1


def test_acknowledgements_apply_per_partition(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 3)
    session = w.open(range(1))
    w.service.acquire(session, session_epoch=0, max_records=500, max_bytes=1 << 20, now_ms=NOW)
    outcome = w.service.acknowledge(
        G, M, (w.topic_id, 0), [[Batch(0, 2, ACCEPT)]], renew_allowed=False, now_ms=NOW
    )
    assert outcome.error_code == ErrorCode.none
    assert w.held() == 0
    renew = w.service.acknowledge(
        G, M, (w.topic_id, 0), [[Batch(0, 0, 4)]], renew_allowed=False, now_ms=NOW
    )
    assert renew.error_code == ErrorCode.invalid_request


def test_a_member_that_left_keeps_its_records_for_the_grace_period(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 3)
    session = w.open(range(1))
    w.service.acquire(session, session_epoch=0, max_records=500, max_bytes=1 << 20, now_ms=NOW)
    w.service.member_departed(Departure(G, M, "left"), NOW)
    assert w.held() == 3
    w.service.expire([], NOW + LEAVE_GRACE_MS - 1)
    assert w.held() == 3
    w.service.expire([], NOW + LEAVE_GRACE_MS)
    assert w.held() == 0
    assert len(w.service.sessions) == 0


def test_a_timed_out_member_loses_its_records_at_once(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 3)
    session = w.open(range(1))
    w.service.acquire(session, session_epoch=0, max_records=500, max_bytes=1 << 20, now_ms=NOW)
    w.service.expire([Departure(G, M, "session timeout")], NOW)
    assert w.held() == 0
    assert len(w.service.sessions) == 0


def test_closing_the_session_releases_what_the_member_holds(tmp_path: Path) -> None:
    w = World(tmp_path, 1, 3)
    session = w.open(range(1))
    w.service.acquire(session, session_epoch=0, max_records=500, max_bytes=1 << 20, now_ms=NOW)
    w.service.close_session(G, M, NOW)
    assert w.held() == 0


def test_session_and_share_partition_keys_hold_the_brokers_own_topic_id(tmp_path: Path) -> None:
    """A request's topic id is a new `uuid.UUID` each time, equal to the broker's: the session
    and the share-partition keep the broker's object, so every later dict look-up of a fetch
    hits by identity (`UUID.__eq__` is Python; bench/PROFILE.md "acquisition")."""
    w = World(tmp_path, 1, 1)
    asked = uuid.UUID(int=w.topic_id.int)
    assert asked == w.topic_id and asked is not w.topic_id
    update = w.service.update_session(G, M, 0, [(asked, 0)], [])
    assert update.session is not None and not update.unknown
    ((tid, _),) = update.session.partitions
    assert tid is w.topic_id
    sp = w.partitions.get(G, asked, 0, 0)
    assert sp is not None and sp.topic_id is w.topic_id
    assert all(key[1] is w.topic_id for key in w.partitions.partitions())
