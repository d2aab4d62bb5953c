"""Huge acknowledgement requests against a `shoal serve` process: what no client could send
gets its error at once, what a client can send is applied, in slices, and another client's
round trips stay fast meanwhile (no request holds the loop for long).

The requests are encoded before the probe starts (encoding 50,000 ranges in kio takes the test
process most of a second), and sent over plain blocking sockets; the probe runs in a thread.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v1 import request as ack_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1
from kio.static.protocol import RequestPayload

from client import Admin
from client import ConfigResourceType
from client import Producer
from client.connection import Connection
from client.records import Record
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from tests.brokers import BrokerProcess
from tests.probe import Probe
from tests.probe import read_frame

# `latency`: measures how long other clients wait, so it runs alone (`make test`).
pytestmark = [pytest.mark.integration, pytest.mark.latency]
GROUP, MEMBER, TOPIC = "hostile", "h" * 22, "hostile-topic"
PARTITIONS = 30
RECORDS = 20
# One producer batch of tiny records on partition 1: a ShareFetch hands it out whole
# (batch_optimized), and acknowledging it one record at a time is a legal request of
# BIG ranges, ~0.5 s of work that must not run in one go.
BIG = 20_000
ACCEPT, REJECT = 1, 3


async def _setup(port: int) -> uuid.UUID:
    """A topic with records, a member holding partition 0's records in an open share session."""
    bootstrap = f"127.0.0.1:{port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, PARTITIONS)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        for i in range(RECORDS):
            await producer.send(TOPIC, b"%d" % i, partition=0)
        await producer.send_batch(TOPIC, 1, [Record(b"") for _ in range(BIG)])
    conn = await Connection.open("127.0.0.1", port)
    try:
        joined = await conn.request(
            hb_v1.ShareGroupHeartbeatRequest(
                group_id=GROUP, member_id=MEMBER, member_epoch=0, subscribed_topic_names=(TOPIC,)
            )
        )
        assert joined.error_code == ErrorCode.none
        assert topic_id is not None
        opened = await conn.request(_fetch(0, topic_id, {}))
        acquired = {
            p.partition_index: [(a.first_offset, a.last_offset) for a in p.acquired_records]
            for p in opened.responses[0].partitions
        }
        assert acquired == {0: [(0, RECORDS - 1)], 1: [(0, BIG - 1)]}
    finally:
        await conn.close()
    return topic_id


def _ranges(m: Any, n: int) -> tuple[Any, ...]:
    """n one-offset ACCEPT ranges on every other offset."""
    return tuple(
        build(m.AcknowledgementBatch, first_offset=2 * i, last_offset=2 * i, acknowledge_types=(1,))
        for i in range(n)
    )


def _fetch(epoch: int, topic_id: uuid.UUID, acks: dict[int, tuple[Any, ...]]) -> Any:
    m = fetch_v1
    parts = tuple(
        build(m.FetchPartition, partition_index=p, acknowledgement_batches=b)
        for p, b in (acks or {0: (), 1: ()}).items()
    )
    return build(
        m.ShareFetchRequest,
        group_id=GROUP,
        member_id=MEMBER,
        share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(build(m.FetchTopic, topic_id=topic_id, partitions=parts),),
        forgotten_topics_data=(),
    )


def _ack(epoch: int, topic_id: uuid.UUID, acks: dict[int, tuple[Any, ...]]) -> Any:
    m = ack_v1
    parts = tuple(
        build(m.AcknowledgePartition, partition_index=p, acknowledgement_batches=b)
        for p, b in acks.items()
    )
    return build(
        m.ShareAcknowledgeRequest,
        group_id=GROUP,
        member_id=MEMBER,
        share_session_epoch=epoch,
        topics=(build(m.AcknowledgeTopic, topic_id=topic_id, partitions=parts),),
    )


def _call(sock: socket.socket, body: RequestPayload, encoded: bytes | None = None) -> Any:
    sock.sendall(encoded or frame(encode_request(body, 7, "hostile-test")))
    return decode_response(body.__api_key__, body.__version__, read_frame(sock))[1]


@pytest.fixture
def session(broker_process: BrokerProcess) -> Iterator[tuple[socket.socket, uuid.UUID]]:
    topic_id = asyncio.run(_setup(broker_process.port))
    sock = socket.create_connection(("127.0.0.1", broker_process.port), timeout=30)
    yield sock, topic_id
    sock.close()


def test_acknowledgements_past_the_records_in_flight_are_refused_without_stalling_others(
    broker_process: BrokerProcess, session: tuple[socket.socket, uuid.UUID]
) -> None:
    """More entries than the share-partition has records in flight must name offsets past
    them: INVALID_REQUEST before any work, as Kafka answers a batch past the acquired records
    (core/src/main/java/kafka/server/share/SharePartition.java,
    fetchSubMapForAcknowledgementBatch)."""
    sock, topic_id = session
    per_offset = build(
        ack_v1.AcknowledgementBatch,
        first_offset=0,
        last_offset=99_998,
        acknowledge_types=tuple(1 + i % 2 for i in range(99_999)),
    )
    hostile = [
        _ack(1, topic_id, {0: _ranges(ack_v1, 50_000)}),
        _fetch(2, topic_id, {0: _ranges(fetch_v1, 50_000)}),
        _ack(3, topic_id, {0: (per_offset,)}),
    ]
    encoded = [frame(encode_request(body, 7, "hostile-test")) for body in hostile]
    with Probe(broker_process.port) as probe:
        refused = [_call(sock, body, raw) for body, raw in zip(hostile, encoded, strict=True)]
    for response in refused:
        assert response.error_code == ErrorCode.none
        [partition] = response.responses[0].partitions
        code = getattr(partition, "acknowledge_error_code", partition.error_code)
        message = getattr(partition, "acknowledge_error_message", partition.error_message)
        assert code == ErrorCode.invalid_request
        assert message and "records in flight" in message
    assert probe.slowest < Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    # Nothing was applied, and the broker is fine: the held records are accepted normally.
    accept_all = build(
        ack_v1.AcknowledgementBatch, first_offset=0, last_offset=RECORDS - 1, acknowledge_types=(1,)
    )
    ok = _call(sock, _ack(4, topic_id, {0: (accept_all,)}))
    assert ok.responses[0].partitions[0].error_code == ErrorCode.none


def test_big_legal_request_is_applied_in_slices(
    broker_process: BrokerProcess, session: tuple[socket.socket, uuid.UUID]
) -> None:
    """Every record of a 20,000-record batch the member holds, acknowledged one by one,
    alternately ACCEPT and REJECT: applied whole (all or none), in slices, with other clients
    served meanwhile; nothing of it is left to deliver."""
    sock, topic_id = session
    one_by_one = tuple(
        build(
            ack_v1.AcknowledgementBatch,
            first_offset=i,
            last_offset=i,
            acknowledge_types=(ACCEPT if i % 2 == 0 else REJECT,),
        )
        for i in range(BIG)
    )
    body = _ack(1, topic_id, {1: one_by_one})
    raw = frame(encode_request(body, 7, "hostile-test"))
    with Probe(broker_process.port) as probe:
        response = _call(sock, body, raw)
    [partition] = response.responses[0].partitions
    assert (partition.error_code, partition.error_message) == (ErrorCode.none, None)
    assert probe.slowest < Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
    # Done: every record of it accepted or archived, so the share-partition starts past it.
    offsets = asyncio.run(_share_offsets(broker_process.port))
    assert offsets[(TOPIC, 1)].start_offset == BIG


async def _share_offsets(port: int) -> dict[tuple[str, int], Any]:
    async with Admin(f"127.0.0.1:{port}") as admin:
        return await admin.describe_share_group_offsets(GROUP)


def test_many_partitions_of_thousands_of_entries_are_checked_in_slices(
    broker_process: BrokerProcess, session: tuple[socket.socket, uuid.UUID]
) -> None:
    """Thousands of entries for each of 30 partitions the member holds nothing in (not even
    loaded): each is checked in full, in slices (INVALID_RECORD_STATE), and other clients are
    served meanwhile."""
    sock, topic_id = session
    acks = {p: _ranges(ack_v1, 2_000) for p in range(2, PARTITIONS)}
    body = _ack(2, topic_id, acks)
    raw = frame(encode_request(body, 7, "hostile-test"))
    _call(sock, _ack(1, topic_id, acks))
    with Probe(broker_process.port) as probe:
        response = _call(sock, body, raw)
    codes = {p.partition_index: p.error_code for p in response.responses[0].partitions}
    assert codes == dict.fromkeys(range(2, PARTITIONS), ErrorCode.invalid_record_state)
    assert probe.slowest < Probe.LIMIT_S, sorted(probe.round_trips)[-5:]
