"""Raw share-group requests for integration tests that speak the wire themselves (kio
ShareGroupHeartbeat v1 and ShareFetch v1 over `client.connection.Connection`), where a
consumer would hide what the test looks at: which fetch parks, which group gets a record."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from client.connection import Connection
from protocol.messages import build


async def join(conn: Connection, group: str, member: str, topic: str) -> None:
    """`member` joins `group` subscribed to `topic` (epoch 0), or the test fails."""
    joined = await conn.request(
        build(
            hb_v1.ShareGroupHeartbeatRequest, group_id=group, member_id=member,
            member_epoch=0, subscribed_topic_names=(topic,),
        )
    )  # fmt: skip
    assert joined.error_code == ErrorCode.none, (group, joined.error_message)


async def leave(conn: Connection, group: str, member: str) -> None:
    """`member` leaves `group` (epoch -1), or the test fails."""
    left = await conn.request(
        build(
            hb_v1.ShareGroupHeartbeatRequest, group_id=group, member_id=member,
            member_epoch=-1, subscribed_topic_names=None,
        )
    )  # fmt: skip
    assert left.error_code == ErrorCode.none, (group, left.error_message)


def share_fetch(
    group: str, member: str, topic_id: uuid.UUID, *, max_wait: datetime.timedelta
) -> Any:
    """A ShareFetch v1 that opens a session (epoch 0) on partition 0 of `topic_id`, with
    librdkafka's sizes (MaxRecords = BatchSize = 500)."""
    partition = build(fetch_v1.FetchPartition, partition_index=0, acknowledgement_batches=())
    return build(
        fetch_v1.ShareFetchRequest,
        group_id=group,
        member_id=member,
        share_session_epoch=0,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(build(fetch_v1.FetchTopic, topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def acquired(response: Any) -> list[tuple[int, int]]:
    """The (first, last) offsets of every AcquiredRecords range of a ShareFetch response."""
    return [
        (a.first_offset, a.last_offset)
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    ]
