"""One kind of group per id, as Kafka's `GroupMetadataManager` keeps it: the admin and group
APIs of one kind refuse an id another kind holds, over a real socket to an in-process broker.

Kafka's answers (group-coordinator/.../GroupMetadataManager.java, Kafka 4.1):
- AlterShareGroupOffsets calls `getOrMaybeCreateShareGroup(groupId, true)`: a group of another
  type (a consumer group; a "simple" classic group, which is what committed offsets alone
  make) gets GROUP_ID_NOT_FOUND, "Group <id> is not a share group.", and nothing is created.
- ConsumerGroupHeartbeat: `getOrMaybeCreateConsumerGroup` refuses a share group with
  GROUP_ID_NOT_FOUND, "Group <id> is not a consumer group."; a share group is persisted
  (in __consumer_offsets), so it is refused after a restart too, before any member returns.
- DeleteGroups: `validateDeleteGroup` -> a consumer group with members is NON_EMPTY_GROUP,
  and only an empty one has its offsets deleted (`deleteAllOffsets`) with the group.
- DescribeGroups v6 (KIP-1043): `classicGroup(groupId)` throws "Group <id> is not a classic
  group." for a group of any other type; an unknown id is "Group <id> not found.".
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from kio.schema.consumer_group_describe import v1 as consumer_describe
from kio.schema.consumer_group_heartbeat import v1 as heartbeat
from kio.schema.delete_groups import v2 as delete_groups
from kio.schema.describe_groups import v6 as describe_groups
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.server import Server
from client.admin import Admin
from client.connection import Connection
from client.errors import KafkaError
from tests.brokers import make_server
from tests.integration.admin_support import FAST_GROUPS

pytestmark = pytest.mark.integration

TOPIC = TopicName("audit")
REBALANCE = i32Timedelta.parse(datetime.timedelta(seconds=30))


def _heartbeat(group: str, member: str, epoch: int) -> heartbeat.ConsumerGroupHeartbeatRequest:
    return heartbeat.ConsumerGroupHeartbeatRequest(
        group_id=GroupId(group),
        member_id=member,
        member_epoch=i32(epoch),
        rebalance_timeout=REBALANCE,
        subscribed_topic_names=(TOPIC,) if epoch == 0 else None,
        server_assignor=None,
        topic_partitions=() if epoch == 0 else None,
    )


async def _delete(conn: Connection, group: str) -> ErrorCode:
    answer = await conn.request(delete_groups.DeleteGroupsRequest(groups_names=(GroupId(group),)))
    (result,) = answer.results
    return ErrorCode(result.error_code)


async def _consumer_group_known(conn: Connection, group: str) -> bool:
    answer = await conn.request(
        consumer_describe.ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group),), include_authorized_operations=False
        )
    )
    return bool(answer.groups[0].error_code == ErrorCode.none)


async def test_alter_share_offsets_refuses_a_consumer_groups_id(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(TOPIC, 1)
            joined = await conn.request(_heartbeat("live", "member-a", 0))
            assert joined.error_code == ErrorCode.none
            await admin.alter_consumer_group_offsets("committed", {(TOPIC, 0): 0})
            for group in ("live", "committed"):
                with pytest.raises(KafkaError) as refused:
                    await admin.alter_share_group_offsets(group, {(TOPIC, 0): 0})
                assert refused.value.error_code == ErrorCode.group_id_not_found
                assert f"Group {group} is not a share group." in str(refused.value)
            # Nothing was made over them: no share group, the offsets as they were.
            assert {(g.group_id, g.group_type) for g in await admin.list_groups()} == {
                ("live", "consumer"),
                ("committed", "consumer"),
            }
            committed = await admin.list_consumer_group_offsets("committed")
            assert committed[(TOPIC, 0)].offset == 0
    finally:
        await conn.close()


async def test_a_share_group_known_only_on_disk_refuses_a_consumer_heartbeat(
    tmp_path: Path,
) -> None:
    srv = make_server(tmp_path / "data", None, **FAST_GROUPS)
    await srv.start()
    try:
        async with Admin(f"127.0.0.1:{srv.port}") as admin:
            await admin.create_topic(TOPIC, 1)
            await admin.alter_share_group_offsets("workers", {(TOPIC, 0): 0})  # durable state
    finally:
        await srv.stop()
    srv = make_server(tmp_path / "data", None, **FAST_GROUPS)  # no member has come back yet
    await srv.start()
    conn = await Connection.open("127.0.0.1", srv.port)
    try:
        refused = await conn.request(_heartbeat("workers", "member-a", 0))
        assert refused.error_code == ErrorCode.group_id_not_found
        assert refused.error_message == "Group workers is not a consumer group."
        assert not await _consumer_group_known(conn, "workers")
    finally:
        await conn.close()
        await srv.stop()


async def test_delete_groups_keeps_a_live_consumer_groups_offsets(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(TOPIC, 1)
            await admin.alter_consumer_group_offsets("auditors", {(TOPIC, 0): 3})
            joined = await conn.request(_heartbeat("auditors", "member-a", 0))
            assert joined.error_code == ErrorCode.none
            assert (await conn.request(_heartbeat("idle", "member-b", 0))).error_code == 0

            assert await _delete(conn, "auditors") == ErrorCode.non_empty_group
            assert await _delete(conn, "idle") == ErrorCode.non_empty_group
            committed = await admin.list_consumer_group_offsets("auditors")
            assert committed[(TOPIC, 0)].offset == 3

            left = await conn.request(_heartbeat("auditors", "member-a", -1))
            assert left.error_code == ErrorCode.none
            assert await _delete(conn, "auditors") == ErrorCode.none  # empty: deleted whole
            assert not await _consumer_group_known(conn, "auditors")
            gone = await admin.list_consumer_group_offsets("auditors", [(TOPIC, 0)])
            assert gone[(TOPIC, 0)].offset == -1
    finally:
        await conn.close()


async def test_describe_groups_v6_names_the_kind_of_a_non_classic_group(broker: Server) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        async with Admin(f"127.0.0.1:{broker.port}") as admin:
            await admin.create_topic(TOPIC, 1)
            await admin.alter_share_group_offsets("workers", {(TOPIC, 0): 0})
        assert (await conn.request(_heartbeat("auditors", "member-a", 0))).error_code == 0
        answer = await conn.request(
            describe_groups.DescribeGroupsRequest(
                groups=(GroupId("auditors"), GroupId("workers"), GroupId("nobody")),
                include_authorized_operations=False,
            )
        )
        assert [(g.error_code, g.error_message, g.group_state) for g in answer.groups] == [
            (ErrorCode.group_id_not_found, "Group auditors is not a classic group.", "Dead"),
            (ErrorCode.group_id_not_found, "Group workers is not a classic group.", "Dead"),
            (ErrorCode.group_id_not_found, "Group nobody not found.", "Dead"),
        ]
    finally:
        await conn.close()
