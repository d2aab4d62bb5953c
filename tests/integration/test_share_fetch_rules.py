"""ShareFetch / ShareAcknowledge protocol rules, with raw kio requests over a real socket."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v2 import request as ack_v2
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_fetch.v2 import request as fetch_v2
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.server import Server
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import Record
from client.connection import Connection
from protocol.messages import build

pytestmark = pytest.mark.integration
GROUP, MEMBER, TOPIC = "rules", "m" * 22, "rules-topic"


async def _setup(server: Server) -> tuple[Connection, uuid.UUID]:
    bootstrap = f"127.0.0.1:{server.port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        for i in range(10):
            await producer.send(TOPIC, b"%d" % i, partition=0)
    conn = await Connection.open("127.0.0.1", server.port)
    joined = await conn.request(
        hb_v1.ShareGroupHeartbeatRequest(
            group_id=GROUP, member_id=MEMBER, member_epoch=0, subscribed_topic_names=(TOPIC,)
        )
    )
    assert joined.error_code == ErrorCode.none
    assert topic_id is not None
    return conn, topic_id


def _fetch(
    m: Any, epoch: int, topic_id: uuid.UUID, acks: tuple[tuple[int, int, int], ...] = (), **kw: Any
) -> Any:
    batches = tuple(
        build(m.AcknowledgementBatch, first_offset=f, last_offset=lst, acknowledge_types=(t,))
        for f, lst, t in acks
    )
    values: dict[str, Any] = {
        "max_wait": datetime.timedelta(milliseconds=100),
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 500,
        "batch_size": 500,
    }
    values.update(kw)
    partition = build(m.FetchPartition, partition_index=0, acknowledgement_batches=batches)
    return build(
        m.ShareFetchRequest,
        group_id=GROUP,
        member_id=MEMBER,
        share_session_epoch=epoch,
        topics=(build(m.FetchTopic, topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
        **values,
    )


async def test_session_epochs_and_piggybacked_acks(server: Server) -> None:
    conn, topic_id = await _setup(server)
    try:
        # Acknowledgements cannot ride on the request that opens a session.
        refused = await conn.request(_fetch(fetch_v1, 0, topic_id, ((0, 0, 1),)))
        assert refused.error_code == ErrorCode.invalid_request
        # An unknown session, then a wrong epoch.
        assert (
            await conn.request(_fetch(fetch_v1, 3, topic_id))
        ).error_code == ErrorCode.share_session_not_found
        opened = await conn.request(_fetch(fetch_v1, 0, topic_id))
        acquired = opened.responses[0].partitions[0].acquired_records
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired] == [(0, 9, 1)]
        wrong = await conn.request(_fetch(fetch_v1, 5, topic_id))
        assert wrong.error_code == ErrorCode.invalid_share_session_epoch
        # RENEW (4) needs v2: on v1 it is an invalid request for that partition, nothing applied.
        renew_v1 = await conn.request(_fetch(fetch_v1, 1, topic_id, ((0, 4, 4),)))
        assert (
            renew_v1.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_request
        )
        # The same topic twice in one request: both listings' acks apply (merged, not replaced).
        twice = _fetch(fetch_v1, 2, topic_id, ((0, 1, 1),))
        twice = dataclasses.replace(
            twice, topics=twice.topics + _fetch(fetch_v1, 2, topic_id, ((5, 6, 3),)).topics
        )
        merged = await conn.request(twice)
        assert merged.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
        # 0-1 accepted and 5-6 rejected: closing acks of the rest (epoch -1) leave only 2-4, 7-9.
        closing = await conn.request(
            build(
                ack_v2.ShareAcknowledgeRequest,
                group_id=GROUP,
                member_id=MEMBER,
                share_session_epoch=-1,
                topics=(
                    build(
                        ack_v2.AcknowledgeTopic,
                        topic_id=topic_id,
                        partitions=(
                            build(
                                ack_v2.AcknowledgePartition,
                                partition_index=0,
                                acknowledgement_batches=(
                                    build(
                                        ack_v2.AcknowledgementBatch,
                                        first_offset=0,
                                        last_offset=1,
                                        acknowledge_types=(1,),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            )
        )
        # 0-1 were already accepted: acknowledging them again is an invalid record state.
        assert closing.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        again = await conn.request(_fetch(fetch_v1, 0, topic_id))
        offsets = [
            (a.first_offset, a.last_offset, a.delivery_count)
            for a in again.responses[0].partitions[0].acquired_records
        ]
        assert offsets == [(2, 4, 2), (7, 9, 2)]  # released on session close, delivered again
    finally:
        await conn.close()


async def test_a_renew_fetch_must_ask_for_nothing(server: Server) -> None:
    conn, topic_id = await _setup(server)
    try:
        await conn.request(_fetch(fetch_v2, 0, topic_id))
        bad = await conn.request(_fetch(fetch_v2, 1, topic_id, ((0, 9, 4),), is_renew_ack=True))
        assert bad.error_code == ErrorCode.invalid_request
        zero = {"max_wait": datetime.timedelta(0), "min_bytes": 0, "max_bytes": 0, "max_records": 0}
        good = await conn.request(
            _fetch(fetch_v2, 1, topic_id, ((0, 9, 4),), is_renew_ack=True, **zero)
        )
        partition = good.responses[0].partitions[0]
        assert (
            good.error_code == ErrorCode.none and partition.acknowledge_error_code == ErrorCode.none
        )
        assert partition.acquired_records == () and partition.records == b""
    finally:
        await conn.close()


async def test_share_acquire_mode_of_a_v2_fetch_makes_max_records_strict(server: Server) -> None:
    """KIP-1206's ShareAcquireMode field: 1 (record_limit) cuts inside a stored batch, 0
    (batch_optimized) hands out the whole batch, anything else is an invalid request."""
    conn, topic_id = await _setup(server)  # offsets 0-9, one record a batch
    try:
        async with Producer(f"127.0.0.1:{server.port}") as producer:
            await producer.send_batch(TOPIC, 0, [Record(value=b"x")] * 20)  # offsets 10-29
        bad = await conn.request(_fetch(fetch_v2, 0, topic_id, share_acquire_mode=2))
        assert bad.error_code == ErrorCode.invalid_request

        def ranges(response: Any) -> list[tuple[int, int]]:
            got = response.responses[0].partitions[0].acquired_records
            return [(a.first_offset, a.last_offset) for a in got]

        strict = await conn.request(
            _fetch(fetch_v2, 0, topic_id, max_records=12, share_acquire_mode=1)
        )
        assert ranges(strict) == [(0, 11)]  # ends two records into the 20-record batch
        loose = await conn.request(
            _fetch(fetch_v2, 1, topic_id, max_records=1, share_acquire_mode=0)
        )
        assert ranges(loose) == [(12, 29)]  # the rest of that batch, whole
    finally:
        await conn.close()


async def test_max_records_in_batch_optimized_mode_stops_at_the_batch_that_holds_the_last(
    server: Server,
) -> None:
    """What one ShareFetch hands out for its MaxRecords, as Kafka's broker does: in
    batch_optimized mode whole stored batches, up to and including the one that holds the
    MaxRecords-th record and no further (core/src/main/java/kafka/server/share/
    SharePartition.java: acquireNewBatchRecords, lastOffsetFromBatchWithRequestOffset), the
    partitions of one request sharing the budget (ShareFetchUtils.processFetchResponse
    acquires with MaxRecords less what earlier partitions took). BatchSize only splits the
    AcquiredRecords entries at batch boundaries there (createBatches); the offsets are the same.

    Over batches of 30 records MaxRecords 500 gets 510 records, not thousands; a producer
    batch of 3,758 records (librdkafka's first batch in issue 27) is handed out whole."""
    bootstrap = f"127.0.0.1:{server.port}"
    topic = "small-batches"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(topic, 3)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    assert topic_id is not None
    async with Producer(bootstrap) as producer:
        for p in (0, 1):
            for _ in range(200):
                await producer.send_batch(topic, p, [Record(value=b"x")] * 30)
        await producer.send_batch(topic, 2, [Record(value=b"y")] * 3758)
    conn = await Connection.open("127.0.0.1", server.port)
    try:
        joined = await conn.request(
            hb_v1.ShareGroupHeartbeatRequest(
                group_id=GROUP, member_id=MEMBER, member_epoch=0, subscribed_topic_names=(topic,)
            )
        )
        assert joined.error_code == ErrorCode.none
        m = fetch_v1
        partitions = tuple(
            build(m.FetchPartition, partition_index=p, acknowledgement_batches=()) for p in range(3)
        )

        async def fetch(epoch: int, max_records: int) -> dict[int, list[tuple[int, int]]]:
            request = _fetch(m, epoch, topic_id, max_records=max_records, batch_size=max_records)
            request = dataclasses.replace(
                request,
                topics=(build(m.FetchTopic, topic_id=topic_id, partitions=partitions),),
            )
            response = await conn.request(request)
            return {
                p.partition_index: [(a.first_offset, a.last_offset) for a in p.acquired_records]
                for t in response.responses
                for p in t.partitions
                if p.acquired_records
            }

        # The session visits its partitions from one further each fetch: 0, then 1, then 2.
        assert await fetch(0, 500) == {0: [(0, 509)]}  # 17 batches: the 17th holds offset 499
        assert await fetch(1, 500) == {1: [(0, 509)]}
        assert await fetch(2, 500) == {2: [(0, 3757)]}  # one batch, bigger than MaxRecords
        assert await fetch(3, 1) == {0: [(510, 539)]}  # MaxRecords 1: one whole batch
        assert await fetch(4, 45) == {1: [(510, 569)]}  # the 2nd batch holds the 45th record
    finally:
        await conn.close()
