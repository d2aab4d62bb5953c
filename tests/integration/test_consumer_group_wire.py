"""ConsumerGroupHeartbeat, ConsumerGroupDescribe and ListGroups for KIP-848 groups, over a
real socket to an in-process broker whose clock the test moves."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.consumer_group_describe import v1 as describe
from kio.schema.consumer_group_heartbeat import v0 as heartbeat_v0
from kio.schema.consumer_group_heartbeat import v1 as heartbeat
from kio.schema.errors import ErrorCode
from kio.schema.list_groups import v5 as list_groups
from kio.schema.share_group_heartbeat import v1 as share_heartbeat
from kio.schema.types import GroupId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.server import Server
from client.admin import Admin
from client.admin import ConfigResourceType
from client.connection import Connection
from tests.clock import ManualClock

pytestmark = pytest.mark.integration

TOPIC = TopicName("audit")
REBALANCE = i32Timedelta.parse(datetime.timedelta(seconds=30))


def _join(group: str, member: str) -> heartbeat.ConsumerGroupHeartbeatRequest:
    return heartbeat.ConsumerGroupHeartbeatRequest(
        group_id=GroupId(group),
        member_id=member,
        member_epoch=i32(0),
        rebalance_timeout=REBALANCE,
        subscribed_topic_names=(TOPIC,),
        server_assignor="range",
        topic_partitions=(),
    )


async def _describe(conn: Connection, group: str) -> describe.response.DescribedGroup:
    answer = await conn.request(
        describe.ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group),), include_authorized_operations=False
        )
    )
    (described,) = answer.groups
    return described  # type: ignore[no-any-return]


async def test_join_describe_list_and_expire(broker: Server, clock: ManualClock) -> None:
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic(TOPIC, 3)
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        joined = await conn.request(_join("auditors", "member-a"))
        assert joined.error_code == ErrorCode.none and joined.member_epoch == 1
        assert joined.heartbeat_interval == datetime.timedelta(seconds=5)
        assert joined.assignment is not None
        (tp,) = joined.assignment.topic_partitions
        assert tp.partitions == (0, 1, 2)

        described = await _describe(conn, "auditors")
        assert (described.error_code, described.group_state) == (ErrorCode.none, "Stable")
        assert (described.assignor_name, described.group_epoch) == ("range", 1)
        (member,) = described.members
        assert member.member_id == "member-a" and member.member_type == 1
        assert member.assignment == member.target_assignment
        assert member.assignment.topic_partitions[0].topic_name == TOPIC

        listed = await conn.request(
            list_groups.ListGroupsRequest(states_filter=(), types_filter=("consumer",))
        )
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
            ("auditors", "consumer", "consumer")
        ]

        clock.advance(45_000)  # group.consumer.session.timeout.ms without a heartbeat
        described = await _describe(conn, "auditors")
        assert (described.group_state, described.members) == ("Empty", ())
        unknown = await _describe(conn, "nobody")
        assert unknown.error_code == ErrorCode.group_id_not_found
    finally:
        await conn.close()


async def test_v0_member_id_comes_from_the_coordinator(broker: Server) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        joined = await conn.request(
            heartbeat_v0.ConsumerGroupHeartbeatRequest(
                group_id=GroupId("g0"),
                member_id="",
                member_epoch=i32(0),
                rebalance_timeout=REBALANCE,
                subscribed_topic_names=(TOPIC,),
                topic_partitions=(),
            )
        )
        assert joined.error_code == ErrorCode.none and joined.member_id
    finally:
        await conn.close()


async def test_a_group_id_is_one_kind_at_a_time(broker: Server) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        shared = await conn.request(
            share_heartbeat.ShareGroupHeartbeatRequest(
                group_id=GroupId("workers"),
                member_id="share-member",
                member_epoch=i32(0),
                subscribed_topic_names=(TOPIC,),
            )
        )
        assert shared.error_code == ErrorCode.none
        refused = await conn.request(_join("workers", "consumer-member"))
        assert refused.error_code == ErrorCode.group_id_not_found
        assert (await conn.request(_join("auditors", "m"))).error_code == ErrorCode.none
        refused_share = await conn.request(
            share_heartbeat.ShareGroupHeartbeatRequest(
                group_id=GroupId("auditors"),
                member_id="share-member",
                member_epoch=i32(0),
                subscribed_topic_names=(TOPIC,),
            )
        )
        assert refused_share.error_code == ErrorCode.group_id_not_found
        assert (await _describe(conn, "workers")).error_code == ErrorCode.group_id_not_found
    finally:
        await conn.close()


async def test_a_groups_configs_set_its_heartbeat_interval_and_session_timeout(
    broker: Server, clock: ManualClock
) -> None:
    """KIP-848's group configs (Kafka's `GroupConfig`): the heartbeat answers the group's
    `consumer.heartbeat.interval.ms`, and a silent member is expired after the group's
    `consumer.session.timeout.ms`; a group without them has the broker's (45 s, 5 s)."""
    async with Admin(f"127.0.0.1:{broker.port}") as admin:
        await admin.create_topic(TOPIC, 3)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP,
            "tuned",
            {"consumer.session.timeout.ms": "55000", "consumer.heartbeat.interval.ms": "8000"},
        )
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        tuned = await conn.request(_join("tuned", "member-t"))
        assert tuned.heartbeat_interval == datetime.timedelta(seconds=8)
        plain = await conn.request(_join("plain", "member-p"))
        assert plain.heartbeat_interval == datetime.timedelta(seconds=5)
        clock.advance(45_000)  # the broker's session timeout: only the plain member goes
        assert (await _describe(conn, "plain")).members == ()
        assert len((await _describe(conn, "tuned")).members) == 1
        clock.advance(10_000)
        assert (await _describe(conn, "tuned")).members == ()
    finally:
        await conn.close()
