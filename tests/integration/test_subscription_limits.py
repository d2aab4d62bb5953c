"""A group heartbeat subscribing to more topics than the broker could ever hold is refused
(issue 27: each heartbeat of its group walked a million names, seconds of a stalled loop).

No client sends one: a topic has one partition at least, and the broker holds at most
max.broker.partitions of them. Kafka has no such limit (nor so small a broker); the refusal
is INVALID_REQUEST, what Kafka answers a heartbeat whose fields do not make sense.
"""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.consumer_group_heartbeat.v1 import request as consumer_hb
from kio.schema.errors import ErrorCode
from kio.schema.share_group_heartbeat.v1 import request as share_hb

from broker.server import Server
from client.connection import Connection
from protocol.messages import build

pytestmark = pytest.mark.integration
LIMIT = 20


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"max.broker.partitions": LIMIT}


def _names(n: int) -> tuple[str, ...]:
    return tuple(f"topic-{i}" for i in range(n))


async def test_a_share_group_heartbeat_naming_too_many_topics_is_refused(broker: Server) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        for n, code in ((LIMIT, ErrorCode.none), (LIMIT + 1, ErrorCode.invalid_request)):
            joined = await conn.request(
                build(
                    share_hb.ShareGroupHeartbeatRequest,
                    group_id=f"g{n}",
                    member_id=uuid.uuid4().hex[:22],
                    member_epoch=0,
                    subscribed_topic_names=_names(n),
                )
            )
            assert joined.error_code == code, joined.error_message
        assert joined.error_message and "max.broker.partitions" in joined.error_message
    finally:
        await conn.close()


async def test_a_consumer_group_heartbeat_naming_too_many_topics_is_refused(
    broker: Server,
) -> None:
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        for n, code in ((LIMIT, ErrorCode.none), (LIMIT + 1, ErrorCode.invalid_request)):
            joined = await conn.request(
                build(
                    consumer_hb.ConsumerGroupHeartbeatRequest,
                    group_id=f"c{n}",
                    member_id=uuid.uuid4().hex[:22],
                    member_epoch=0,
                    rebalance_timeout=datetime.timedelta(seconds=60),
                    subscribed_topic_names=_names(n),
                    topic_partitions=(),
                )
            )
            assert joined.error_code == code, joined.error_message
    finally:
        await conn.close()
