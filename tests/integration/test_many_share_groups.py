"""A broker serves any number of share groups (issue 11, item 1).

`group.share.max.groups` (default 10) refused the 11th group of the broker's lifetime with
GROUP_MAX_SIZE_REACHED, which librdkafka treats as fatal. In Kafka it sizes the share-session
cache and never refuses a group: 1,000 groups join, consume and leave, and every one stays
listed (empty groups keep their offsets and configs until deleted).
"""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.server import Server
from client import Admin
from client import Producer
from client.connection import Connection
from protocol.messages import build

pytestmark = pytest.mark.integration
TOPIC, GROUPS = "many", 1000


async def _join_fetch_leave(conn: Connection, group: str, topic_id: object) -> int:
    member = f"{group}-member-0000000000"[-22:]
    joined = await conn.request(
        hb_v1.ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=(TOPIC,)
        )
    )
    assert joined.error_code == ErrorCode.none, (group, joined.error_message)
    fetched = await conn.request(
        build(
            fetch_v1.ShareFetchRequest,
            group_id=group,
            member_id=member,
            share_session_epoch=0,
            max_wait=datetime.timedelta(milliseconds=0),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=(
                build(
                    fetch_v1.FetchTopic,
                    topic_id=topic_id,
                    partitions=(build(fetch_v1.FetchPartition, partition_index=0),),
                ),
            ),
            forgotten_topics_data=(),
        )
    )
    assert fetched.error_code == ErrorCode.none
    left = await conn.request(
        hb_v1.ShareGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=-1, subscribed_topic_names=None
        )
    )
    assert left.error_code == ErrorCode.none
    return sum(
        a.last_offset - a.first_offset + 1
        for t in fetched.responses
        for p in t.partitions
        for a in p.acquired_records
    )


async def test_a_thousand_share_groups(server: Server) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, 1)
    # Every group starts at the log end (latest), so records come after the joins.
    conns = [await Connection.open("127.0.0.1", server.port) for _ in range(8)]
    try:
        groups = [f"group-{i:04d}" for i in range(GROUPS)]
        for i in range(0, GROUPS, len(conns)):
            await asyncio.gather(
                *(
                    _join_fetch_leave(c, g, topic_id)
                    for c, g in zip(conns, groups[i:], strict=False)
                )
            )
        async with Producer(bootstrap) as producer:
            await producer.send(TOPIC, b"for everyone", partition=0)
        got = []
        for i in range(0, GROUPS, len(conns)):
            got += await asyncio.gather(
                *(
                    _join_fetch_leave(c, g, topic_id)
                    for c, g in zip(conns, groups[i:], strict=False)
                )
            )
        assert got == [1] * GROUPS  # each group received the record: they are independent
    finally:
        for c in conns:
            await c.close()
    async with Admin(bootstrap) as admin:
        listed = {g.group_id for g in await admin.list_groups()}
    assert listed == set(groups)
