"""A broker serves any number of share groups (issue 11, item 1).

`group.share.max.groups` (default 10) refused the 11th group of the broker's lifetime with
GROUP_MAX_SIZE_REACHED, which librdkafka treats as fatal. In Kafka it sizes the share-session
cache and never refuses a group: 1,000 groups join, consume and leave, and every one stays
listed (empty groups keep their offsets and configs until deleted).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.server import Server
from client import Admin
from client import Producer
from client.connection import Connection
from tests.integration.share_wire import acquired
from tests.integration.share_wire import join
from tests.integration.share_wire import leave
from tests.integration.share_wire import share_fetch

pytestmark = pytest.mark.integration
TOPIC, GROUPS = "many", 1000


async def _join_fetch_leave(conn: Connection, group: str, topic_id: uuid.UUID) -> int:
    """How many records one member of `group` is handed by one fetch between joining and
    leaving."""
    member = f"{group}-member-0000000000"[-22:]
    await join(conn, group, member, TOPIC)
    fetch = share_fetch(group, member, topic_id, max_wait=datetime.timedelta(0))
    fetched = await conn.request(fetch)
    assert fetched.error_code == ErrorCode.none
    await leave(conn, group, member)
    return sum(last - first + 1 for first, last in acquired(fetched))


async def test_a_thousand_share_groups(server: Server) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, 1)
    assert topic_id is not None
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
