"""Classic consumer groups over a real socket, request by request (kio's own classes).

Two clients on their own connections: a JoinGroup that must wait for a rebalance waits in the
broker while other requests go on; the broker's clock, moved by the test, ends sessions.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from kio.schema.describe_groups.v5 import request as describe_v5
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4 import request as heartbeat_v4
from kio.schema.join_group.v0 import request as join_v0
from kio.schema.join_group.v9 import request as join_v9
from kio.schema.leave_group.v0 import request as leave_v0
from kio.schema.share_group_heartbeat.v1 import request as share_heartbeat_v1
from kio.schema.sync_group.v0 import request as sync_v0
from kio.schema.sync_group.v5 import request as sync_v5
from kio.static.protocol import RequestPayload

from broker.metrics import COORDINATOR
from broker.server import Server
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from tests.clock import ManualClock

pytestmark = pytest.mark.integration

GROUP = "g"
SESSION = datetime.timedelta(milliseconds=10_000)


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"group.initial.rebalance.delay.ms": 0}


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation = reader, writer, 0

    @classmethod
    async def open(cls, server: Server) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", server.port))

    async def call(self, request: RequestPayload) -> Any:
        self.correlation += 1
        self.writer.write(frame(encode_request(request, self.correlation, "test")))
        await self.writer.drain()
        size = SIZE.unpack(await self.reader.readexactly(4))[0]
        _, response = decode_response(
            request.__api_key__, request.__version__, await self.reader.readexactly(size)
        )
        return response

    def close(self) -> None:
        self.writer.close()


def _join9(member_id: str = "", metadata: bytes = b"m") -> join_v9.JoinGroupRequest:
    return build(
        join_v9.JoinGroupRequest,
        group_id=GROUP,
        session_timeout=SESSION,
        rebalance_timeout=datetime.timedelta(milliseconds=30_000),
        member_id=member_id,
        protocol_type="consumer",
        protocols=(build(join_v9.JoinGroupRequestProtocol, name="range", metadata=metadata),),
    )


async def _member(conn: Conn) -> str:
    """A v9 member's two-step join (MEMBER_ID_REQUIRED, then the join): its member id."""
    first = await conn.call(_join9())
    assert first.error_code is ErrorCode.member_id_required
    return str(first.member_id)


async def test_an_old_client_joins_syncs_heartbeats_and_leaves(broker: Server) -> None:
    conn = await Conn.open(broker)
    join = build(
        join_v0.JoinGroupRequest,
        group_id=GROUP,
        session_timeout=SESSION,
        member_id="",
        protocol_type="consumer",
        protocols=(build(join_v0.JoinGroupRequestProtocol, name="range", metadata=b"meta"),),
    )
    joined = await conn.call(join)  # v0: no MEMBER_ID_REQUIRED step
    assert joined.error_code is ErrorCode.none and joined.generation_id == 1
    assert joined.leader == joined.member_id
    assert [(m.member_id, m.metadata) for m in joined.members] == [(joined.member_id, b"meta")]
    synced = await conn.call(
        build(
            sync_v0.SyncGroupRequest,
            group_id=GROUP,
            generation_id=1,
            member_id=joined.member_id,
            assignments=(
                build(
                    sync_v0.SyncGroupRequestAssignment,
                    member_id=joined.member_id,
                    assignment=b"all of it",
                ),
            ),
        )
    )
    assert synced.error_code is ErrorCode.none and synced.assignment == b"all of it"
    beat = build(heartbeat_v4.HeartbeatRequest, group_id=GROUP, generation_id=1,
                 member_id=joined.member_id)  # fmt: skip
    assert (await conn.call(beat)).error_code is ErrorCode.none
    left = await conn.call(
        build(leave_v0.LeaveGroupRequest, group_id=GROUP, member_id=joined.member_id)
    )
    assert left.error_code is ErrorCode.none
    described = await conn.call(build(describe_v5.DescribeGroupsRequest, groups=(GROUP,)))
    assert described.groups[0].group_state == "Empty"
    sample = broker.services.metrics.registry.get_sample_value
    assert sample(f"{COORDINATOR}_classicgroupcount", {"state": "Empty"}) == 1
    assert sample(f"{COORDINATOR}_classicgroupcount", {"state": "Stable"}) == 0
    assert sample(f"{COORDINATOR}_classicgrouprebalance_total") == 2  # joined, then emptied
    conn.close()


async def test_a_join_waits_for_the_rebalance_and_a_silent_member_expires(
    broker: Server, clock: ManualClock
) -> None:
    a_conn, b_conn = await Conn.open(broker), await Conn.open(broker)
    a = await _member(a_conn)
    first = await a_conn.call(_join9(a))
    assert first.generation_id == 1
    await a_conn.call(build(sync_v5.SyncGroupRequest, group_id=GROUP, generation_id=1,
                            member_id=a, assignments=()))  # fmt: skip
    b = await _member(b_conn)
    b_join = asyncio.ensure_future(b_conn.call(_join9(b)))
    await asyncio.sleep(0.2)
    assert not b_join.done()  # waits until a rejoins
    beat = build(heartbeat_v4.HeartbeatRequest, group_id=GROUP, generation_id=1, member_id=a)
    assert (await a_conn.call(beat)).error_code is ErrorCode.rebalance_in_progress
    a_rejoined = await a_conn.call(_join9(a))
    b_joined = await asyncio.wait_for(b_join, 5)
    assert a_rejoined.generation_id == b_joined.generation_id == 2
    assert {m.member_id for m in a_rejoined.members} == {a, b}
    # b goes silent; a keeps heartbeating; after b's session, a is told to rejoin alone.
    for _ in range(3):
        clock.advance(4_000)
        beat = build(heartbeat_v4.HeartbeatRequest, group_id=GROUP, generation_id=2,
                     member_id=a)  # fmt: skip
        code = (await a_conn.call(beat)).error_code
    assert code is ErrorCode.rebalance_in_progress
    assert set(broker.services.classic_groups.coordinator.groups[GROUP].members) == {a}
    a_conn.close()
    b_conn.close()


async def test_one_kind_per_group_id(broker: Server) -> None:
    conn = await Conn.open(broker)
    broker.services.logs.create_topic("t", 1, {})
    share = await conn.call(
        build(
            share_heartbeat_v1.ShareGroupHeartbeatRequest,
            group_id="shared",
            member_id="m" * 22,
            member_epoch=0,
            subscribed_topic_names=("t",),
        )
    )
    assert share.error_code is ErrorCode.none
    joined = await conn.call(build(join_v9.JoinGroupRequest, **{
        **{f: getattr(_join9(), f) for f in ("session_timeout", "rebalance_timeout",
                                              "protocol_type", "protocols")},
        "group_id": "shared", "member_id": "",
    }))  # fmt: skip
    assert joined.error_code is ErrorCode.inconsistent_group_protocol
    member = await _member(conn)
    assert (await conn.call(_join9(member))).error_code is ErrorCode.none
    refused = await conn.call(
        build(
            share_heartbeat_v1.ShareGroupHeartbeatRequest,
            group_id=GROUP,
            member_id="n" * 22,
            member_epoch=0,
            subscribed_topic_names=("t",),
        )
    )
    assert refused.error_code is ErrorCode.group_id_not_found
    conn.close()
