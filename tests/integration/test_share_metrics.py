"""Kafka's share-group metrics on a real broker's /metrics, moved by real client traffic:
per-topic ShareFetch/ShareAcknowledge request counts and failures, record bytes per topic,
partition-level error codes, releases on close and on lock expiry, partition load time."""

from __future__ import annotations

import asyncio
import datetime
import socket
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v2 import request as ack_v2
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.server import Server
from client import AcknowledgeType
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import Record
from client import ShareConsumer
from client.connection import Connection
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import encode_request
from tests.clock import ManualClock
from tests.scrape import samples as samples_of
from tests.scrape import scrape_text as scrape_page

pytestmark = pytest.mark.integration

TOPICS = "kafka_server_brokertopicmetrics"
SHARE = "kafka_server_sharegroupmetrics"
COORD = "kafka_server_groupcoordinatormetrics"


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"metrics.port": 0}


async def scrape_text(server: Server) -> str:
    return await scrape_page(server.metrics_port)


async def scrape(server: Server) -> dict[str, float]:
    return samples_of(await scrape_text(server))


async def _setup(bootstrap: str, topic: str, group: str, records: int) -> int:
    """A one-partition topic holding `records` records, read from the start by `group`;
    the record bytes appended."""
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP,
            group,
            {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000"},
        )
    async with Producer(bootstrap) as producer:
        for i in range(records):
            await producer.send(topic, b"value-%d" % i, partition=0)
    return records


async def _poll_all(consumer: ShareConsumer, n: int) -> list[object]:
    got: list[object] = []
    for _ in range(40):
        got += await consumer.poll(0.5)
        if len(got) >= n:
            break
    assert len(got) == n
    return got


async def test_share_requests_bytes_and_releases_are_counted_per_topic(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    await _setup(bootstrap, "t1", "g1", 10)
    async with ShareConsumer(bootstrap, "g1", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["t1"])
        records = await _poll_all(consumer, 10)
        for record in records[:4]:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)  # type: ignore[arg-type]
        assert all(code == 0 for code in (await consumer.commit_sync()).values())
    # The other 6 were never acknowledged: closing the consumer released them.

    samples = await scrape(broker)
    t = '{topic="t1"}'
    assert samples[f"{TOPICS}_totalsharefetchrequestspersec_total{t}"] >= 1
    assert samples[f"{TOPICS}_failedsharefetchrequestspersec_total{t}"] == 0
    assert samples[f"{TOPICS}_totalshareacknowledgementrequestspersec_total{t}"] >= 1
    assert samples[f"{TOPICS}_failedshareacknowledgementrequestspersec_total{t}"] == 0
    assert samples[f'{SHARE}_recordsreleasedpersec_total{{reason="member_left"}}'] == 6
    assert samples[f'{SHARE}_recordsreleasedpersec_total{{reason="lock_timeout"}}'] == 0
    # Record bytes, not frames: what went in is what the share consumer got out, per topic.
    bytes_in = samples[f"{TOPICS}_bytesin_bytes_total{t}"]
    assert 10 * len(b"value-0") < bytes_in < 10 * 200
    assert samples[f"{TOPICS}_bytesout_bytes_total{t}"] >= bytes_in
    assert samples[f"{SHARE}_partitionloadtime_seconds_count"] >= 1
    text = await scrape_text(broker)
    assert "_created" not in text


async def test_partition_errors_and_lock_expiry_releases_are_counted(
    broker: Server, clock: ManualClock
) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    await _setup(bootstrap, "t2", "g2", 3)
    async with ShareConsumer(bootstrap, "g2", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["t2"])
        records = await _poll_all(consumer, 3)
        clock.advance(1000)  # the locks expire: the records are no longer this member's
        for record in records:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)  # type: ignore[arg-type]
        results = await consumer.commit_sync()
        assert any(code != 0 for code in results.values()), results

    samples = await scrape(broker)
    t = '{topic="t2"}'
    assert samples[f"{TOPICS}_failedshareacknowledgementrequestspersec_total{t}"] >= 1
    assert samples[f'{SHARE}_recordsreleasedpersec_total{{reason="lock_timeout"}}'] == 3
    # The failure is per partition (the response's own code is NONE), and is counted.
    errors = "kafka_network_requestmetrics_errors_total"
    errors += '{error="invalid_record_state",request="ShareAcknowledge"}'
    assert samples[errors] >= 1


async def test_share_groups_by_state_rebalances_and_lag(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    await _setup(bootstrap, "t3", "g3", 8)
    before = await scrape(broker)
    assert before[f'{COORD}_sharegroupcount{{state="Stable"}}'] == 0
    async with ShareConsumer(bootstrap, "g3", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["t3"])
        records = await _poll_all(consumer, 8)
        for record in records[:3]:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)  # type: ignore[arg-type]
        assert all(code == 0 for code in (await consumer.commit_sync()).values())
        during = await scrape(broker)
        async with Producer(bootstrap) as producer:
            for i in range(4):
                await producer.send("t3", b"more-%d" % i, partition=0)
        grown = await scrape(broker)
    after = await scrape(broker)

    assert during[f'{COORD}_sharegroupcount{{state="Stable"}}'] == 1
    assert during[f"{COORD}_sharegrouprebalance_total"] >= 1
    lag = 'kafka_sharegroup_lag{group="g3",partition="0",topic="t3"}'
    # 8 delivered, 3 accepted: 5 acquired are not done. The SHARE_DELTA the acceptance wrote
    # to the log past SPEO is no record to deliver: not lag.
    assert during[lag] == 5
    assert grown[lag] == during[lag] + 4  # and 4 more never delivered
    assert grown['kafka_sharegroup_lag_sum{group="g3"}'] == grown[lag]
    assert after[f'{COORD}_sharegroupcount{{state="Empty"}}'] == 1
    assert after[f'{COORD}_sharegroupcount{{state="Stable"}}'] == 0
    assert after[lag] >= grown[lag]  # released on close: still to be done
    assert after["shoal_sharegroup_lag_series_omitted"] == 0


async def test_a_share_fetch_refused_whole_fails_every_topic_it_names(broker: Server) -> None:
    """A ShareFetch on a share session the broker does not have (epoch 5, never opened) is
    refused at the top level: each topic it named counts a failed request."""
    bootstrap = f"127.0.0.1:{broker.port}"
    await _setup(bootstrap, "t4", "g4", 1)
    topic = broker.services.logs.topic("t4")
    assert topic is not None
    m = fetch_v1
    request = build(
        m.ShareFetchRequest, group_id="g4", member_id="AAAAAAAAAAAAAAAAAAAAAA",
        share_session_epoch=5, max_wait=datetime.timedelta(milliseconds=10), min_bytes=1,
        max_bytes=1 << 20, max_records=500, batch_size=500,
        topics=(build(m.FetchTopic, topic_id=topic.topic_id, partitions=(
            build(m.FetchPartition, partition_index=0, acknowledgement_batches=()),)),),
        forgotten_topics_data=(),
    )  # fmt: skip
    conn = await Connection.open("127.0.0.1", broker.port, client_id="stale-session")
    try:
        response = await conn.request(request)
    finally:
        await conn.close()
    assert response.error_code != 0
    samples = await scrape(broker)
    t = '{topic="t4"}'
    assert samples[f"{TOPICS}_totalsharefetchrequestspersec_total{t}"] == 1
    assert samples[f"{TOPICS}_failedsharefetchrequestspersec_total{t}"] == 1


async def test_every_share_fetch_counts_for_its_topics_with_records_or_without(
    broker: Server,
) -> None:
    """TotalShareFetchRequestsPerSec marks every topic of a share fetch's partitions, whether
    the fetch found records or waited and came back empty (SharePartitionManager.fetchMessages
    marks it before the fetch is tried). Counted only when records came back, an idle group's
    consumers showed 4 of 47 fetches."""
    bootstrap = f"127.0.0.1:{broker.port}"
    await _setup(bootstrap, "t5", "g5", 2)
    async with ShareConsumer(bootstrap, "g5", acknowledgement_mode="implicit") as consumer:
        consumer.subscribe(["t5"])
        assert len(await _poll_all(consumer, 2)) == 2
        for _ in range(6):  # nothing more to give: each poll's fetches come back empty
            assert await consumer.poll(0.2) == []
    samples = await scrape(broker)
    fetches = samples['kafka_network_requestmetrics_requests_total{request="ShareFetch"}']
    assert fetches >= 7
    # One topic: every ShareFetch named it (the session holds its one partition).
    assert samples[f'{TOPICS}_totalsharefetchrequestspersec_total{{topic="t5"}}'] == fetches
    assert samples[f'{TOPICS}_failedsharefetchrequestspersec_total{{topic="t5"}}'] == 0


async def test_a_share_acknowledge_whose_client_went_is_counted(broker: Server) -> None:
    """A ShareAcknowledge whose connection is closed right after it was sent. Its
    acknowledgements are applied all the same (a big one runs to its end in a task of its
    own: `broker.ack_slices`), and the metrics count what was applied, whether or not the
    client is still there to be answered: Kafka's broker counts a request's topics once it
    has started their acknowledgements, and the failed ones when they complete, with no
    regard to the connection (core/src/main/java/kafka/server/share/
    SharePartitionManager.java: `acknowledge` marks totalShareAcknowledgementRequestRate per
    topic, `mapAcknowledgementFutures` the failed ones). Before, the cancelled request never
    reached its counting: TotalShareAcknowledgementRequestsPerSec stayed at 0."""
    bootstrap, records = f"127.0.0.1:{broker.port}", 4_000
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic("gone", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "g", {"share.auto.offset.reset": "earliest"}
        )
    assert topic_id is not None
    async with Producer(bootstrap) as producer:
        await producer.send_batch("gone", 0, [Record(value=b"x")] * records)
    member = "m" * 22
    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        join = build(
            hb_v1.ShareGroupHeartbeatRequest, group_id="g", member_id=member,
            member_epoch=0, subscribed_topic_names=("gone",),
        )  # fmt: skip
        joined = await conn.request(join)
        assert joined.error_code == ErrorCode.none
        fetch = build(
            fetch_v1.ShareFetchRequest, group_id="g", member_id=member,
            share_session_epoch=0, max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=1, max_bytes=1 << 24, max_records=records, batch_size=records,
            topics=(build(fetch_v1.FetchTopic, topic_id=topic_id, partitions=(
                build(fetch_v1.FetchPartition, partition_index=0),
            )),),
            forgotten_topics_data=(),
        )  # fmt: skip
        fetched = await conn.request(fetch)
        acquired = fetched.responses[0].partitions[0].acquired_records
        assert [(a.first_offset, a.last_offset) for a in acquired] == [(0, records - 1)]
        # One range a record, ACCEPT and REJECT in turn: thousands of runs, a job of steps.
        batches = tuple(
            build(
                ack_v2.AcknowledgementBatch,
                first_offset=o,
                last_offset=o,
                acknowledge_types=(1 if o % 2 == 0 else 3,),
            )
            for o in range(records)
        )
        request = build(
            ack_v2.ShareAcknowledgeRequest, group_id="g", member_id=member,
            share_session_epoch=1,
            topics=(build(ack_v2.AcknowledgeTopic, topic_id=topic_id, partitions=(
                build(ack_v2.AcknowledgePartition, partition_index=0,
                      acknowledgement_batches=batches),
            )),),
        )  # fmt: skip
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:
            sock.sendall(frame(encode_request(request, 1, "gone-at-once")))
        metrics = broker.services.metrics
        deadline = time.monotonic() + 30
        while metrics.record_acks.values["Accept"] < records // 2:
            assert time.monotonic() < deadline, "the acknowledgements were not applied"
            await asyncio.sleep(0.02)
        assert metrics.record_acks.values["Reject"] == records // 2
        while metrics.share_ack_requests.values.get("gone", 0) < 1:
            assert time.monotonic() < deadline, "the applied acknowledgements were not counted"
            await asyncio.sleep(0.02)
        samples = await scrape(broker)
        t = '{topic="gone"}'
        assert samples[f"{TOPICS}_totalshareacknowledgementrequestspersec_total{t}"] == 1
        assert samples[f"{TOPICS}_failedshareacknowledgementrequestspersec_total{t}"] == 0
        assert samples[f'{SHARE}_shareacknowledgementpersec_total{{result="ok"}}'] == 1
    finally:
        await conn.close()


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "general"])
async def test_a_share_fetch_whose_client_went_while_it_waited_counts_its_acks(
    broker: Server, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """A ShareFetch that ACCEPTs its member's record, then waits for more (none come), its
    connection closed meanwhile: the ACCEPT was applied, and it is counted as it is applied
    (Kafka: `SharePartitionManager.acknowledge` marks the topic's requests as it starts them,
    whatever happens to the fetch after). Before, both paths counted it with the answer,
    after the long poll, which a cancelled fetch never reached."""
    from broker.handlers import share_fetch_direct

    monkeypatch.setattr(share_fetch_direct, "ENABLED", direct)
    bootstrap, topic = f"127.0.0.1:{broker.port}", f"waited-{direct}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(topic, 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, topic, {"share.auto.offset.reset": "earliest"}
        )
    assert topic_id is not None
    async with Producer(bootstrap) as producer:
        await producer.send_batch(topic, 0, [Record(value=b"x")])
    member = "w" * 22

    def fetch(epoch: int, acks: tuple[Any, ...], wait_ms: int) -> Any:
        partition = build(fetch_v1.FetchPartition, partition_index=0, acknowledgement_batches=acks)
        return build(
            fetch_v1.ShareFetchRequest, group_id=topic, member_id=member,
            share_session_epoch=epoch, max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
            topics=(build(fetch_v1.FetchTopic, topic_id=topic_id, partitions=(partition,)),),
            forgotten_topics_data=(),
        )  # fmt: skip

    conn = await Connection.open("127.0.0.1", broker.port)
    try:
        join = build(
            hb_v1.ShareGroupHeartbeatRequest, group_id=topic, member_id=member,
            member_epoch=0, subscribed_topic_names=(topic,),
        )  # fmt: skip
        assert (await conn.request(join)).error_code == ErrorCode.none
        fetched = await conn.request(fetch(0, (), 500))
        acquired = fetched.responses[0].partitions[0].acquired_records
        assert [(a.first_offset, a.last_offset) for a in acquired] == [(0, 0)]
        accept = build(
            fetch_v1.AcknowledgementBatch, first_offset=0, last_offset=0, acknowledge_types=(1,)
        )
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:
            sock.sendall(frame(encode_request(fetch(1, (accept,), 30_000), 1, "gone-waiting")))
        metrics = broker.services.metrics
        deadline = time.monotonic() + 10
        while metrics.record_acks.values["Accept"] < 1:
            assert time.monotonic() < deadline, "the ACCEPT was not applied"
            await asyncio.sleep(0.02)
        while metrics.share_ack_requests.values.get(topic, 0) < 1:
            assert time.monotonic() < deadline, "the applied ACCEPT was not counted"
            await asyncio.sleep(0.02)
        samples = await scrape(broker)
        t = f'{{topic="{topic}"}}'
        assert samples[f"{TOPICS}_totalshareacknowledgementrequestspersec_total{t}"] == 1
        assert samples[f"{TOPICS}_failedshareacknowledgementrequestspersec_total{t}"] == 0
    finally:
        await conn.close()
