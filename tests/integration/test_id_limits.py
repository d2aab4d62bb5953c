"""Ids over 255 bytes are refused where they enter; partitions that do not exist are answered
once with their error and never kept in a share session. Raw kio requests, a real socket."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6 import request as fc_v6
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.server import Server
from broker.share.share_session_cache import ShareSessionKey
from client import Admin
from client import ConfigResourceType
from client.connection import Connection
from client.errors import KafkaError
from protocol.messages import build

pytestmark = pytest.mark.integration
TOPIC, GROUP, MEMBER = "ids", "ids-group", "m" * 22
LONG = "g" * 30_000


def _fetch(group: str, member: str, epoch: int, topics: dict[uuid.UUID, tuple[int, ...]]) -> Any:
    m = fetch_v1
    return build(
        m.ShareFetchRequest,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=50),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=tuple(
            build(
                m.FetchTopic,
                topic_id=t,
                partitions=tuple(build(m.FetchPartition, partition_index=p) for p in ps),
            )
            for t, ps in topics.items()
        ),
        forgotten_topics_data=(),
    )


async def test_long_group_and_member_ids_are_refused(server: Server) -> None:
    conn = await Connection.open("127.0.0.1", server.port)
    try:
        joined = await conn.request(
            hb_v1.ShareGroupHeartbeatRequest(
                group_id=LONG, member_id=MEMBER, member_epoch=0, subscribed_topic_names=(TOPIC,)
            )
        )
        assert joined.error_code == ErrorCode.invalid_group_id
        assert server.services.coordinator.groups == {}  # no group was created
        long_member = await conn.request(
            hb_v1.ShareGroupHeartbeatRequest(
                group_id=GROUP, member_id="m" * 256, member_epoch=0, subscribed_topic_names=(TOPIC,)
            )
        )
        assert long_member.error_code == ErrorCode.invalid_request
        assert server.services.coordinator.groups == {}
        fetch = await conn.request(_fetch(LONG, MEMBER, 0, {}))
        assert fetch.error_code == ErrorCode.invalid_group_id
        ack = await conn.request(
            build(
                ack_v1.ShareAcknowledgeRequest,
                group_id=GROUP,
                member_id="m" * 256,
                share_session_epoch=1,
                topics=(),
            )
        )
        assert ack.error_code == ErrorCode.invalid_request
        found = await conn.request(
            build(fc_v6.FindCoordinatorRequest, key_type=0, coordinator_keys=(LONG, GROUP))
        )
        assert [c.error_code for c in found.coordinators] == [
            ErrorCode.invalid_group_id,
            ErrorCode.none,
        ]
        # A group config for such an id would be stored: refused like the rest.
        async with Admin(f"127.0.0.1:{server.port}") as admin:
            with pytest.raises(KafkaError) as refused:
                await admin.incremental_alter_configs(
                    ConfigResourceType.GROUP, LONG, {"share.auto.offset.reset": "earliest"}
                )
        assert refused.value.error_code == ErrorCode.invalid_group_id
        # 255 bytes is still fine.
        ok = await conn.request(
            hb_v1.ShareGroupHeartbeatRequest(
                group_id="g" * 255,
                member_id=MEMBER,
                member_epoch=0,
                subscribed_topic_names=(TOPIC,),
            )
        )
        assert ok.error_code == ErrorCode.none
    finally:
        await conn.close()


async def test_unknown_partitions_are_answered_once_and_not_kept(server: Server) -> None:
    async with Admin(f"127.0.0.1:{server.port}") as admin:
        topic_id = await admin.create_topic(TOPIC, 1)
    assert topic_id is not None
    conn = await Connection.open("127.0.0.1", server.port)
    try:
        joined = await conn.request(
            hb_v1.ShareGroupHeartbeatRequest(
                group_id=GROUP, member_id=MEMBER, member_epoch=0, subscribed_topic_names=(TOPIC,)
            )
        )
        assert joined.error_code == ErrorCode.none
        ghost = uuid.uuid4()
        opened = await conn.request(_fetch(GROUP, MEMBER, 0, {topic_id: (0, 7), ghost: (0,)}))
        codes = {
            (t.topic_id, p.partition_index): p.error_code
            for t in opened.responses
            for p in t.partitions
        }
        assert codes == {
            (topic_id, 7): ErrorCode.unknown_topic_or_partition,
            (ghost, 0): ErrorCode.unknown_topic_id,
        }
        later = await conn.request(_fetch(GROUP, MEMBER, 1, {}))
        assert later.error_code == ErrorCode.none
        assert [p for t in later.responses for p in t.partitions] == []
        session = server.services.share_fetch.sessions.get(ShareSessionKey(GROUP, MEMBER))
        assert session is not None
        assert list(session.partitions) == [(topic_id, 0)]
    finally:
        await conn.close()
