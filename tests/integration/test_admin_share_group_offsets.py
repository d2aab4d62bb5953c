"""Share-group offsets through our client: Describe (SPSO, lag), Alter (reset), Delete."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from kio.schema.alter_share_group_offsets import v0 as alter_v0
from kio.schema.delete_share_group_offsets import v0 as delete_v0
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i64

from broker.server import Server
from broker.share.share_group_offsets import ShareGroupOffsets
from client.admin import Admin
from client.errors import KafkaError
from client.share_acks import AcknowledgeType
from client.share_consumer import ShareConsumer
from protocol.framing import frame
from protocol.messages import encode_request
from tests.brokers import make_server
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.admin_support import consume_all
from tests.integration.admin_support import poll_until
from tests.integration.admin_support import prepare
from tests.integration.admin_support import produce

pytestmark = pytest.mark.integration

GROUP, TOPIC = "workers", "jobs"
TP = (TOPIC, 0)


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


async def test_describe_offsets_reports_spso_and_lag(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    await prepare(bootstrap, TOPIC, GROUP)
    await produce(bootstrap, TOPIC, 10)
    async with Admin(bootstrap) as admin:
        async with ShareConsumer(bootstrap, GROUP, acknowledgement_mode="explicit") as consumer:
            consumer.subscribe([TOPIC])
            records = await poll_until(consumer, 10)
            assert len(records) == 10
            for r in records[:4]:
                consumer.acknowledge(r, AcknowledgeType.ACCEPT)
            consumer.acknowledge(records[6], AcknowledgeType.REJECT)
            await consumer.commit_sync()
            offsets = (await admin.describe_share_group_offsets(GROUP))[TP]
            # 0-3 accepted (SPSO moved past them), 6 rejected, the rest still acquired. The
            # share checkpoint written at offset 10 when the group started is passed too:
            # control records are never delivered, are no lag, and are no ARCHIVED record.
            assert (offsets.start_offset, offsets.lag) == (4, 5)
            assert (offsets.end_offset, offsets.acquired, offsets.archived) == (11, 5, 1)
            assert offsets.control == 1
        offsets = (await admin.describe_share_group_offsets(GROUP))[TP]
        assert (offsets.start_offset, offsets.lag, offsets.available) == (4, 5, 5)
        await produce(bootstrap, TOPIC, 3, start=10)
        assert (await admin.describe_share_group_offsets(GROUP, [TP]))[TP].lag == 8


async def test_describe_offsets_of_a_partition_never_started(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    await prepare(bootstrap, TOPIC, GROUP, partitions=2)
    await produce(bootstrap, TOPIC, 2)  # all to partition 0
    async with Admin(bootstrap) as admin:
        await admin.alter_share_group_offsets(GROUP, {TP: 0})
        offsets = await admin.describe_share_group_offsets(GROUP, [TP, (TOPIC, 1)])
        assert offsets[TP].start_offset == 0 and offsets[TP].lag == 2
        assert (offsets[(TOPIC, 1)].start_offset, offsets[(TOPIC, 1)].lag) == (-1, -1)
        assert list(await admin.describe_share_group_offsets(GROUP)) == [TP]
        with pytest.raises(KafkaError) as info:
            await admin.describe_share_group_offsets(GROUP, [("nope", 0)])
        assert info.value.error_code == ErrorCode.unknown_topic_or_partition


async def test_alter_offsets_of_a_group_with_members_is_non_empty_group(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    await prepare(bootstrap, TOPIC, GROUP)
    await produce(bootstrap, TOPIC, 1)
    async with Admin(bootstrap) as admin, ShareConsumer(bootstrap, GROUP) as consumer:
        consumer.subscribe([TOPIC])
        assert len(await poll_until(consumer, 1)) == 1
        with pytest.raises(KafkaError) as info:
            await admin.alter_share_group_offsets(GROUP, {TP: 0})
        assert info.value.error_code == ErrorCode.non_empty_group
        with pytest.raises(KafkaError) as info:
            await admin.delete_share_group_offsets(GROUP, [TOPIC])
        assert info.value.error_code == ErrorCode.non_empty_group


async def test_alter_offsets_errors(broker: Server) -> None:
    async with Admin(_bootstrap(broker)) as admin:
        await admin.create_topic(TOPIC, 1)
        with pytest.raises(KafkaError) as info:
            await admin.alter_share_group_offsets(GROUP, {("nope", 0): 0})
        assert info.value.error_code == ErrorCode.unknown_topic_or_partition
        with pytest.raises(KafkaError) as info:
            await admin.alter_share_group_offsets(GROUP, {(TOPIC, 5): 0})
        assert info.value.error_code == ErrorCode.unknown_topic_or_partition
        with pytest.raises(KafkaError) as info:
            await admin.alter_share_group_offsets(GROUP, {TP: -1})
        assert info.value.error_code == ErrorCode.invalid_request
        with pytest.raises(KafkaError) as info:
            await admin.delete_share_group_offsets("nobody", [TOPIC])
        assert info.value.error_code == ErrorCode.group_id_not_found


async def test_reset_drops_in_flight_state_and_survives_a_restart(tmp_path: Path) -> None:
    srv = make_server(tmp_path / "data", **FAST_GROUPS)
    await srv.start()
    bootstrap = _bootstrap(srv)
    await prepare(bootstrap, TOPIC, GROUP)
    await produce(bootstrap, TOPIC, 10)
    assert len(await consume_all(bootstrap, TOPIC, GROUP, 10)) == 10
    async with Admin(bootstrap) as admin:
        assert (await admin.describe_share_group_offsets(GROUP))[TP].lag == 0
        await admin.alter_share_group_offsets(GROUP, {TP: 3})
        offsets = (await admin.describe_share_group_offsets(GROUP))[TP]
        assert (offsets.start_offset, offsets.lag, offsets.acknowledged) == (3, 7, 0)
    await srv.stop()

    srv = make_server(tmp_path / "data", **FAST_GROUPS)
    await srv.start()
    bootstrap = _bootstrap(srv)
    try:
        async with Admin(bootstrap) as admin:
            assert (await admin.describe_share_group_offsets(GROUP))[TP].start_offset == 3
        async with ShareConsumer(bootstrap, GROUP) as consumer:
            consumer.subscribe([TOPIC])
            records = await poll_until(consumer, 7)
        assert [r.offset for r in records] == list(range(3, 10))
        assert {r.delivery_count for r in records} == {1}  # delivery counts were dropped
    finally:
        await srv.stop()


async def test_alter_offsets_initialises_a_new_group(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    async with Admin(bootstrap) as admin:
        await admin.create_topic(TOPIC, 1)
        await produce(bootstrap, TOPIC, 5)
        await admin.alter_share_group_offsets("fresh", {TP: 2})
        assert [(g.group_id, g.state) for g in await admin.list_groups()] == [("fresh", "Empty")]
    async with ShareConsumer(bootstrap, "fresh") as consumer:
        consumer.subscribe([TOPIC])
        assert [r.offset for r in await poll_until(consumer, 3)] == [2, 3, 4]


async def test_delete_offsets_starts_the_topic_afresh(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    await prepare(bootstrap, TOPIC, GROUP)
    await produce(bootstrap, TOPIC, 4)
    assert len(await consume_all(bootstrap, TOPIC, GROUP, 4)) == 4
    async with Admin(bootstrap) as admin:
        await admin.delete_share_group_offsets(GROUP, [TOPIC])
        assert await admin.describe_share_group_offsets(GROUP) == {}
        with pytest.raises(KafkaError) as info:
            await admin.delete_share_group_offsets(GROUP, [TOPIC])  # nothing left to delete
        assert info.value.error_code == ErrorCode.unknown_topic_or_partition
    # The group's config says earliest: everything is delivered again, as a first delivery.
    records = await consume_all(bootstrap, TOPIC, GROUP, 4)
    assert [(r.offset, r.delivery_count) for r in records] == [(i, 1) for i in range(4)]


async def test_offsets_altered_for_a_client_gone_at_once_are_altered_whole(
    broker: Server,
) -> None:
    """An AlterShareGroupOffsets that initialises a new share group on many share-partitions
    (a slice at a time), whose client closes its connection right after sending it. Every
    share-partition is initialised, as Kafka's coordinator writes an accepted request's records
    whatever became of it (`GroupCoordinatorService.alterShareGroupOffsets` initialises them
    through its persister). Before, the request's task, cancelled when its connection was
    lost, stopped between slices: the group was made with some share-partitions started and
    the rest not."""
    partitions = 1000
    await asyncio.to_thread(broker.services.logs.create_topic, TOPIC, partitions)
    m = alter_v0.request
    topic = m.AlterShareGroupOffsetsRequestTopic(
        topic_name=TopicName(TOPIC),
        partitions=tuple(
            m.AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(0))
            for p in range(partitions)
        ),
    )
    request = alter_v0.AlterShareGroupOffsetsRequest(group_id=GroupId(GROUP), topics=(topic,))
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(frame(encode_request(request, 1, "gone-at-once")))
    offsets = ShareGroupOffsets(broker.services.share_partitions, broker.services.logs,
                                broker.services.now_ms)  # fmt: skip
    deadline = asyncio.get_running_loop().time() + 30
    while len(offsets.partitions(GROUP)) < partitions:
        assert asyncio.get_running_loop().time() < deadline, len(offsets.partitions(GROUP))
        await asyncio.sleep(0.05)


async def test_offsets_deleted_for_a_client_gone_at_once_are_deleted_whole(
    broker: Server,
) -> None:
    """A DeleteShareGroupOffsets of a topic with many share-partitions (forgotten a slice at
    a time), whose client closes its connection right after sending it: every one is
    forgotten, as Kafka's coordinator deletes them through its persister whatever became of
    the request (`GroupCoordinatorService.deleteShareGroupOffsets`). Before, the request's
    task, cancelled when its connection was lost, stopped between slices."""
    partitions = 1000
    await asyncio.to_thread(broker.services.logs.create_topic, TOPIC, partitions)
    async with Admin(_bootstrap(broker)) as admin:
        await admin.alter_share_group_offsets(GROUP, {(TOPIC, p): 0 for p in range(partitions)})
    offsets = ShareGroupOffsets(broker.services.share_partitions, broker.services.logs,
                                broker.services.now_ms)  # fmt: skip
    assert len(offsets.partitions(GROUP)) == partitions
    # The snapshot files caught up first: a snapshot write under way while share-partitions
    # are deleted brings them back (a race of its own, reported; not this test's).
    await broker._snapshots()
    m = delete_v0.request
    topic = m.DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(TOPIC))
    request = delete_v0.DeleteShareGroupOffsetsRequest(group_id=GroupId(GROUP), topics=(topic,))
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(frame(encode_request(request, 1, "gone-at-once")))
    deadline = asyncio.get_running_loop().time() + 30
    while offsets.partitions(GROUP):
        assert asyncio.get_running_loop().time() < deadline, len(offsets.partitions(GROUP))
        await asyncio.sleep(0.05)
