"""Committed offsets over a real socket with our own client: OffsetCommit's refusals,
OffsetFetch's forms, OffsetDelete, DeleteTopics and DeleteGroups taking the offsets along,
the internal log staying out of sight, and the lag metric."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import socket
import time
from collections.abc import Mapping
from types import ModuleType
from typing import TypeVar

import pytest
from kio.schema.delete_topics import v6 as delete_v6
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit import v8 as commit
from kio.schema.offset_fetch import v9 as fetch
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64

from broker.server import Server
from client import Admin
from client import Producer
from client.errors import KafkaError
from coordinator.offset_store import OffsetStore
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import encode_request
from storage.log_manager import LogManager
from storage.topics import CONSUMER_OFFSETS
from tests.clock import ManualClock
from tests.scrape import scrape_text

pytestmark = pytest.mark.integration
K = TypeVar("K")
WEEK_MS = 7 * 24 * 3600 * 1000  # offsets.retention.minutes' default


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"metrics.port": 0}


def _commit(
    group: str, offsets: dict[tuple[str, int], tuple[int, str]]
) -> commit.OffsetCommitRequest:
    r = commit.request
    topics: dict[str, list[commit.request.OffsetCommitRequestPartition]] = {}
    for (t, p), (offset, metadata) in offsets.items():
        topics.setdefault(t, []).append(
            r.OffsetCommitRequestPartition(
                partition_index=i32(p), committed_offset=i64(offset),
                committed_leader_epoch=i32(4), committed_metadata=metadata,
            )
        )  # fmt: skip
    return commit.OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(-1), member_id="",
        group_instance_id=None,
        topics=tuple(r.OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(ps))
                     for t, ps in topics.items()),
    )  # fmt: skip


def schema(api: str, version: int) -> ModuleType:
    """kio's request module of one version (this test walks versions the client does not speak)."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.request")


def _codes(results: Mapping[K, KafkaError | None]) -> dict[K, ErrorCode]:
    return {k: ErrorCode.none if e is None else e.error_code for k, e in results.items()}


async def test_commit_refusals_and_both_fetch_forms(broker: Server) -> None:
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic("orders", 2)
        resp = await admin.cluster.request(
            _commit("g", {("orders", 0): (5, "m"), ("orders", 7): (1, ""), ("nope", 0): (1, ""),
                          ("orders", 1): (2, "x" * 4097)})
        )  # fmt: skip
        codes = {(t.name, int(p.partition_index)): p.error_code for t in resp.topics
                 for p in t.partitions}  # fmt: skip
        assert codes == {
            ("orders", 0): ErrorCode.none,
            ("orders", 7): ErrorCode.unknown_topic_or_partition,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
            ("orders", 1): ErrorCode.offset_metadata_too_large,
        }
        committed = await admin.list_consumer_group_offsets("g")
        assert {tp: (c.offset, c.leader_epoch, c.metadata) for tp, c in committed.items()} == {
            ("orders", 0): (5, 4, "m")
        }
        # v8+: several groups in one request; a partition never committed answers -1.
        r = fetch.request
        asked = (
            r.OffsetFetchRequestTopics(
                name=TopicName("orders"), partition_indexes=(i32(0), i32(1))
            ),
        )
        many = await admin.cluster.request(
            fetch.OffsetFetchRequest(
                groups=(
                    r.OffsetFetchRequestGroup(group_id=GroupId("g"), topics=asked),
                    r.OffsetFetchRequestGroup(group_id=GroupId("other"), topics=None),
                ),
                require_stable=True,
            )
        )
        g, other = many.groups
        assert [int(p.committed_offset) for p in g.topics[0].partitions] == [5, -1]
        assert (other.error_code, other.topics) == (ErrorCode.none, ())


async def test_null_topics_answer_every_commit_topics_by_name_partitions_in_order(
    broker: Server,
) -> None:
    # Committed out of order, over two commits and two topics: OffsetFetch with null topics
    # (v9's groups and v7's one group) answers each commit once, topics by name, partitions
    # in order, as the handler gathers them in slices.
    from kio.schema.offset_fetch import v7 as fetch_v7

    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic("b", 4)
        await admin.create_topic("a", 2)
        await admin.alter_consumer_group_offsets("g", {("b", 3): 30, ("a", 1): 11, ("b", 0): 0})
        await admin.alter_consumer_group_offsets("g", {("b", 2): 20, ("a", 0): 10, ("b", 1): 10})
        expected = [("a", [(0, 10), (1, 11)]), ("b", [(0, 0), (1, 10), (2, 20), (3, 30)])]
        r = fetch.request
        many = await admin.cluster.request(
            fetch.OffsetFetchRequest(
                groups=(r.OffsetFetchRequestGroup(group_id=GroupId("g"), topics=None),),
                require_stable=False,
            )
        )
        (group,) = many.groups
        assert [
            (t.name, [(int(p.partition_index), int(p.committed_offset)) for p in t.partitions])
            for t in group.topics
        ] == expected
        one = await admin.cluster.request(
            fetch_v7.OffsetFetchRequest(group_id=GroupId("g"), topics=None, require_stable=False)
        )
        assert one.error_code == ErrorCode.none
        assert [
            (t.name, [(int(p.partition_index), int(p.committed_offset)) for p in t.partitions])
            for t in one.topics
        ] == expected


async def test_deleting_offsets_a_topic_and_a_group(broker: Server) -> None:
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic("a", 2)
        await admin.create_topic("b", 1)
        errors = await admin.alter_consumer_group_offsets(
            "g", {("a", 0): 1, ("a", 1): 2, ("b", 0): 3}
        )
        assert set(errors.values()) == {None}
        await admin.alter_consumer_group_offsets("h", {("b", 0): 9})
        deleted = await admin.delete_consumer_group_offsets("g", [("a", 1), ("zzz", 0)])
        assert _codes(deleted) == {
            ("a", 1): ErrorCode.none, ("zzz", 0): ErrorCode.unknown_topic_or_partition
        }  # fmt: skip
        left = await admin.list_consumer_group_offsets("g")
        assert sorted(left) == [("a", 0), ("b", 0)]
        with pytest.raises(KafkaError) as unknown:
            await admin.delete_consumer_group_offsets("never", [("a", 0)])
        assert unknown.value.error_code == ErrorCode.group_id_not_found

        await admin.delete_topic("b")  # every group's offsets of the topic go with it
        assert sorted(await admin.list_consumer_group_offsets("g")) == [("a", 0)]
        groups = {g.group_id: (g.group_type, g.state) for g in await admin.list_groups()}
        assert groups == {"g": ("consumer", "Empty")}  # h had only b: nothing left
        deleted_groups = await admin.delete_groups(["g", "h"])
        assert _codes(deleted_groups) == {
            "g": ErrorCode.none, "h": ErrorCode.group_id_not_found
        }  # fmt: skip
        assert await admin.list_groups() == []
        assert await admin.list_consumer_group_offsets("g") == {}


async def test_a_topic_deleted_for_a_client_gone_at_once_takes_its_offsets_along(
    broker: Server,
) -> None:
    """A DeleteTopics whose client closes its connection right after sending it. The deletion
    runs to its end, as a Kafka controller's does, and so must what goes with it: the groups'
    committed offsets of the topic (Kafka's `GroupMetadataManager` drops them when a topic
    is deleted: `onPartitionsDeleted` / `cleanupGroupMetadata`). Left behind, a topic made
    again under the name would have its consumer group start at the old offsets in a new log,
    skipping the first records produced to it. (They were skipped before: the request's task,
    cancelled when its connection is lost, did them after the deletion.)"""
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("b", 60)  # its deletion spans several loop turns
        assert set((await admin.alter_consumer_group_offsets("g", {("b", 0): 3})).values()) == {
            None
        }
    request = delete_v6.DeleteTopicsRequest(
        topics=(delete_v6.request.DeleteTopicState(name=TopicName("b"), topic_id=None),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
    )
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(frame(encode_request(request, 1, "gone-at-once")))
    async with Admin(bootstrap) as admin:
        deadline = time.monotonic() + 30
        while broker.services.logs.topic("b") is not None or (
            await admin.list_consumer_group_offsets("g")
        ):
            assert time.monotonic() < deadline, "the deleted topic's offsets stayed"
            await asyncio.sleep(0.02)
        await admin.create_topic("b", 1)
        assert await admin.list_consumer_group_offsets("g") == {}


async def test_the_internal_log_is_no_topic(broker: Server) -> None:
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic("t", 1)
        await admin.alter_consumer_group_offsets("g", {("t", 0): 0})
        assert sorted(await admin.list_topics()) == ["t"]
        with pytest.raises(KafkaError) as refused:
            await admin.create_topic(CONSUMER_OFFSETS, 1)
        assert refused.value.error_code == ErrorCode.invalid_topic_exception
        with pytest.raises(KafkaError) as unknown:
            await admin.delete_topic(CONSUMER_OFFSETS)
        assert unknown.value.error_code == ErrorCode.unknown_topic_or_partition
    assert (broker.config.data_dir / f"{CONSUMER_OFFSETS}-0").is_dir()


async def test_lag_per_group_is_a_metric(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("m", 2)
        async with Producer(bootstrap) as producer:
            for i in range(5):
                await producer.send("m", b"%d" % i, partition=0)
            await producer.send("m", b"x", partition=1)
        await admin.alter_consumer_group_offsets("slow", {("m", 0): 1, ("m", 1): 0})
        await admin.alter_consumer_group_offsets("fast", {("m", 0): 5})
    text = await scrape_text(broker.metrics_port)
    assert 'kafka_consumergroup_lag_sum{consumergroup="slow"} 5.0' in text
    assert 'kafka_consumergroup_lag_sum{consumergroup="fast"} 0.0' in text
    assert "shoal_consumergroup_lag_groups_omitted 0.0" in text


async def test_offsets_expire_after_offsets_retention_minutes(
    broker: Server, clock: ManualClock
) -> None:
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic("r", 2)
        await admin.alter_consumer_group_offsets("idle", {("r", 0): 1})
        clock.advance(WEEK_MS - 60_000)
        await admin.alter_consumer_group_offsets("idle", {("r", 1): 2})  # a newer commit
        assert sorted(await admin.list_consumer_group_offsets("idle")) == [("r", 0), ("r", 1)]
        clock.advance(60_000)  # the first commit is a week old: it expires on its own
        assert sorted(await admin.list_consumer_group_offsets("idle")) == [("r", 1)]
        clock.advance(WEEK_MS)
        assert await admin.list_groups() == []
    broker.services.logs.close()  # the expiry is durable: tombstones in the log
    reopened = LogManager(broker.config.data_dir)
    assert OffsetStore.open(reopened, clock.now_ms).groups() == set()
    reopened.close()


async def test_every_version_commits_and_fetches(broker: Server) -> None:
    """OffsetCommit v2-v9 and OffsetFetch v1-v9 (what librdkafka, aiokafka and kafka-python
    send), each answered in its own layout."""
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic("v", 1)
        for version in range(2, 10):
            m = schema("offset_commit", version)
            part = build(m.OffsetCommitRequestPartition, partition_index=0,
                         committed_offset=version, committed_metadata=f"v{version}")  # fmt: skip
            topic = build(m.OffsetCommitRequestTopic, name="v", partitions=(part,))
            resp = await admin.cluster.request(
                build(
                    m.OffsetCommitRequest,
                    group_id="g",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    topics=(topic,),
                )
            )
            assert resp.topics[0].partitions[0].error_code == ErrorCode.none, version
        for version in range(1, 10):
            m = schema("offset_fetch", version)
            asked = {"name": "v", "partition_indexes": (0,)}
            if version >= 8:
                group = build(m.OffsetFetchRequestGroup, group_id="g",
                              topics=(build(m.OffsetFetchRequestTopics, **asked),))  # fmt: skip
                resp = await admin.cluster.request(build(m.OffsetFetchRequest, groups=(group,)))
                (partition,) = resp.groups[0].topics[0].partitions
            else:
                topics = (build(m.OffsetFetchRequestTopic, **asked),)
                resp = await admin.cluster.request(
                    build(m.OffsetFetchRequest, group_id="g", topics=topics)
                )
                (partition,) = resp.topics[0].partitions
            assert (partition.committed_offset, partition.metadata) == (9, "v9"), version
