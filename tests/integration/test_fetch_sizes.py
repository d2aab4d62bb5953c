"""The bytes of a Fetch or ShareFetch answer, counted on raw kio frames over a real socket
(issue 29): at most MaxBytes, except the one whole batch KIP-74 lets through so a consumer
always progresses, and each partition within its own limit.

Fetch is read as Kafka's `ReplicaManager.readFromLog` reads: partitions in request order, each
within min(PartitionMaxBytes, what is left of MaxBytes), and only until a partition has returned
bytes may the next return its first batch whole above those (`minOneMessage`). The broker's
`fetch.max.bytes` caps MaxBytes (KIP-541, `KafkaApis.handleFetchRequest`). ShareFetch shares
MaxBytes evenly among the partitions that can acquire (`PartitionMaxBytesStrategy` UNIFORM,
KAFKA-18404), reads them the same way (`DelayedShareFetch` through `readFromLog`; share fetches
are not hard-limited, KAFKA-18936), and starts one partition further at each session epoch
(`PartitionRotateStrategy`, KAFKA-17951).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as share_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.server import Server
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import Record
from client.connection import Connection
from protocol.messages import build
from protocol.record_batch import iter_batch_headers
from tests.brokers import make_server

pytestmark = pytest.mark.integration
TOPIC, GROUP, MEMBER = "sizes", "sizes-group", "s" * 22
KB = 1000
# Per partition, the values of its batches (one record each): two big, one of small ones.
LAYOUT = {0: [600 * KB], 1: [600 * KB], 2: [100 * KB, 100 * KB]}


async def _started(tmp_path: Path, **config: object) -> AsyncIterator[Server]:
    srv = make_server(tmp_path / "data", **config)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
async def sized(tmp_path: Path) -> AsyncIterator[tuple[Server, uuid.UUID]]:
    """A broker holding `LAYOUT` (its topic id with it)."""
    async for srv in _started(tmp_path):
        yield srv, await _fill(srv)


async def _fill(srv: Server) -> uuid.UUID:
    bootstrap = f"127.0.0.1:{srv.port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, len(LAYOUT))
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        for p, values in LAYOUT.items():
            for n in values:
                await producer.send_batch(TOPIC, p, [Record(b"v" * n)])
    assert topic_id is not None
    return topic_id


def _fetch(max_bytes: int, parts: list[tuple[int, int, int]]) -> Any:
    """Fetch v12 of `parts` (partition, offset, PartitionMaxBytes), in that order."""
    return build(
        fetch_v12.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            build(
                fetch_v12.FetchTopic,
                topic=TOPIC,
                partitions=tuple(
                    build(
                        fetch_v12.FetchPartition,
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=limit,
                    )
                    for p, offset, limit in parts
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _batches(response: Any) -> dict[int, list[int]]:
    """Per partition answered, the sizes of the whole batches it carries."""
    out: dict[int, list[int]] = {}
    for t in response.responses:
        for p in t.partitions:
            assert p.error_code == ErrorCode.none
            out[p.partition_index] = [h.size for _, h in iter_batch_headers(p.records or b"")]
    return out


async def test_fetch_gives_only_the_first_data_a_batch_above_the_limits(
    sized: tuple[Server, uuid.UUID],
) -> None:
    srv, _ = sized
    conn = await Connection.open("127.0.0.1", srv.port)
    try:
        whole = _batches(await conn.request(_fetch(1 << 30, [(p, 0, 1 << 30) for p in LAYOUT])))
        big, small = whole[0][0], whole[2][0]
        assert big > 600 * KB and whole == {0: [big], 1: [big], 2: [small, small]}
        every = [(p, 0, 1 << 20) for p in LAYOUT]

        # 1 MB: the first big batch fits, the second would not; the small ones fit what is left.
        got = _batches(await conn.request(_fetch(1_000_000, every)))
        assert got == {0: [big], 1: [], 2: [small, small]}

        # Below one batch: the first partition's batch comes whole, nothing else.
        got = _batches(await conn.request(_fetch(100 * KB, every)))
        assert got == {0: [big], 1: [], 2: []}

        # A partition with nothing to read returns no bytes: the next one's batch still may.
        at_end = [(0, 1, 1 << 20), (2, 0, 50 * KB), (1, 0, 1 << 20)]
        assert _batches(await conn.request(_fetch(100 * KB, at_end))) == {0: [], 2: [small], 1: []}

        # PartitionMaxBytes bounds each partition once a partition has returned bytes.
        per_partition = [(0, 0, 1 << 20), (2, 0, small + small // 2)]
        got = _batches(await conn.request(_fetch(10 << 20, per_partition)))
        assert got == {0: [big], 2: [small]}
    finally:
        await conn.close()


async def test_the_brokers_fetch_max_bytes_caps_max_bytes(tmp_path: Path) -> None:
    async for srv in _started(tmp_path, **{"fetch.max.bytes": 300 * KB}):
        await _fill(srv)
        conn = await Connection.open("127.0.0.1", srv.port)
        try:
            got = _batches(await conn.request(_fetch(10 << 20, [(2, 0, 1 << 20), (0, 0, 1 << 20)])))
            assert [len(got[2]), len(got[0])] == [2, 0]
            got = _batches(await conn.request(_fetch(10 << 20, [(0, 0, 1 << 20), (2, 0, 1 << 20)])))
            assert [len(got[0]), len(got[2])] == [1, 0]
        finally:
            await conn.close()


async def _member(conn: Connection) -> None:
    joined = await conn.request(
        hb_v1.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=MEMBER, member_epoch=0, subscribed_topic_names=(TOPIC,)
        )
    )
    assert joined.error_code == ErrorCode.none


def _share_fetch(topic_id: uuid.UUID, epoch: int, max_bytes: int, max_records: int = 500) -> Any:
    return build(
        share_v1.ShareFetchRequest,
        group_id=GROUP,
        member_id=MEMBER,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=max_records,
        topics=(
            build(
                share_v1.FetchTopic,
                topic_id=topic_id,
                partitions=tuple(
                    build(share_v1.FetchPartition, partition_index=p, acknowledgement_batches=())
                    for p in (LAYOUT if epoch == 0 else ())
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def _acquired(response: Any) -> dict[int, tuple[list[int], int]]:
    """Per partition that acquired: its batch sizes and how many records it acquired."""
    assert response.error_code == ErrorCode.none
    out: dict[int, tuple[list[int], int]] = {}
    for t in response.responses:
        for p in t.partitions:
            assert p.error_code == ErrorCode.none
            if p.acquired_records:
                sizes = [h.size for _, h in iter_batch_headers(p.records or b"")]
                count = sum(a.last_offset - a.first_offset + 1 for a in p.acquired_records)
                out[p.partition_index] = (sizes, count)
    return out


async def test_share_fetch_shares_max_bytes_among_its_partitions(
    sized: tuple[Server, uuid.UUID],
) -> None:
    """1 MB over three partitions: a third each. The first partition's big batch comes whole
    (KIP-74); the second's does not fit its third; the third's two small ones do."""
    srv, topic_id = sized
    conn = await Connection.open("127.0.0.1", srv.port)
    try:
        await _member(conn)
        got = _acquired(await conn.request(_share_fetch(topic_id, 0, 1_000_000)))
        assert sorted(got) == [0, 2]
        (big,), small = got[0][0], got[2][0][0]
        assert got == {0: ([big], 1), 2: ([small, small], 2)}
        assert big + 2 * small <= 1_000_000
    finally:
        await conn.close()


async def test_share_fetch_order_follows_the_session_epoch(
    sized: tuple[Server, uuid.UUID],
) -> None:
    """Kafka turns the session's partitions left by the request's epoch: after a fetch at
    epoch 0 and a ShareAcknowledge at epoch 1, the fetch at epoch 2 starts at partition 2."""
    srv, topic_id = sized
    conn = await Connection.open("127.0.0.1", srv.port)
    try:
        await _member(conn)
        first = _acquired(await conn.request(_share_fetch(topic_id, 0, 1 << 30, max_records=1)))
        assert list(first) == [0]
        acked = await conn.request(
            build(
                ack_v1.ShareAcknowledgeRequest,
                group_id=GROUP,
                member_id=MEMBER,
                share_session_epoch=1,
                topics=(
                    build(
                        ack_v1.AcknowledgeTopic,
                        topic_id=topic_id,
                        partitions=(
                            build(
                                ack_v1.AcknowledgePartition,
                                partition_index=0,
                                acknowledgement_batches=(
                                    build(
                                        ack_v1.AcknowledgementBatch,
                                        first_offset=0,
                                        last_offset=0,
                                        acknowledge_types=(1,),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            )
        )
        assert acked.error_code == ErrorCode.none
        second = _acquired(await conn.request(_share_fetch(topic_id, 2, 1 << 30, max_records=1)))
        assert list(second) == [2]
    finally:
        await conn.close()
