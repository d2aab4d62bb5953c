"""Metrics scraped over HTTP and JSON log lines, from a real broker."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from broker.server import Server
from client import AcknowledgeType
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import ShareConsumer
from tests.brokers import BrokerProcess
from tests.clock import ManualClock
from tests.scrape import scrape as scrape_samples

pytestmark = pytest.mark.integration

ACK_METRIC = "kafka_server_sharegroupmetrics_recordacknowledgementspersec_total"


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"metrics.port": 0}  # an ephemeral port for the scrape endpoint


async def scrape(server: Server) -> dict[str, float]:
    """Every sample of the metrics endpoint: 'name{labels}' -> value."""
    return await scrape_samples(server.metrics_port)


async def test_acknowledgements_are_counted_by_type(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("m", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "g", {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        for i in range(20):
            await producer.send("m", b"%d" % i, partition=0)
    # 7 accepts, 5 releases, 3 rejects, 4 renews (then accepted: 4 more accepts), 1 accept later.
    plan = (
        [AcknowledgeType.ACCEPT] * 7 + [AcknowledgeType.RELEASE] * 5 + [AcknowledgeType.REJECT] * 3
    )
    async with ShareConsumer(bootstrap, "g", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["m"])
        records = []
        for _ in range(50):
            records += await consumer.poll(0.5)
            if len(records) >= 20:
                break
        assert len(records) == 20
        for record, kind in zip(records, plan, strict=False):
            consumer.acknowledge(record, kind)
        renewed = records[15:19]
        for record in renewed:
            consumer.acknowledge(record, AcknowledgeType.RENEW)
        consumer.acknowledge(records[19], AcknowledgeType.ACCEPT)
        results = await consumer.commit_sync()
        assert all(code == 0 for code in results.values()), results
        for record in renewed:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)
        assert all(code == 0 for code in (await consumer.commit_sync()).values())

    samples = await scrape(broker)
    assert samples[f'{ACK_METRIC}{{ackType="Accept"}}'] == 7 + 1 + 4
    assert samples[f'{ACK_METRIC}{{ackType="Release"}}'] == 5
    assert samples[f'{ACK_METRIC}{{ackType="Reject"}}'] == 3
    assert samples[f'{ACK_METRIC}{{ackType="Renew"}}'] == 4
    assert samples['kafka_network_requestmetrics_requests_total{request="ShareAcknowledge"}'] >= 2
    assert samples["kafka_server_sharegroupmetrics_recordsacquiredpersec_total"] == 20
    assert samples['kafka_server_brokertopicmetrics_bytesin_bytes_total{topic="m"}'] > 0
    # No label carries a member id or an offset: every label value is from a bounded set.
    for name in samples:
        for value in re.findall(r'="([^"]*)"', name):
            assert len(value) < 40 and not re.fullmatch(r"[A-Za-z0-9_-]{22}", value), name


async def test_lock_expiries_and_archivals_at_the_limit_are_counted(
    broker: Server, clock: ManualClock
) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("x", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP,
            "g2",
            {
                "share.auto.offset.reset": "earliest",
                "share.record.lock.duration.ms": "1000",
                "share.delivery.count.limit": "2",
            },
        )
    async with Producer(bootstrap) as producer:
        await producer.send("x", b"poison", partition=0)
    async with ShareConsumer(bootstrap, "g2", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["x"])
        deliveries = 0
        for _ in range(40):  # take it twice and never acknowledge: two lock expiries
            got = await consumer.poll(0.5)
            deliveries += len(got)
            if got:
                clock.advance(1000)  # the lock duration: the broker expires the lock now
            if deliveries == 2:
                break
        assert deliveries == 2
    samples = await scrape(broker)
    assert samples["kafka_server_sharegroupmetrics_acquisitionlocktimeoutpersec_total"] == 2
    assert samples["kafka_server_sharegroupmetrics_deliverycountlimitarchivedpersec_total"] == 1


def test_json_logs_parse_and_carry_the_request_fields(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin import NewTopic

    with BrokerProcess(tmp_path / "data") as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap, "client.id": "log-test"})
        for future in admin.create_topics([NewTopic("bad name!", 1, 1)]).values():
            with pytest.raises(Exception):  # noqa: B017 - the broker's refusal is what we log
                future.result(10)
        proc.stop()
        lines = proc.log_path.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert records, lines
    assert all({"event", "level", "timestamp"} <= r.keys() for r in records)
    bound = [r for r in records if r.get("api") == "CreateTopics"]
    assert bound, records
    assert bound[0]["client_id"] == "log-test" and isinstance(bound[0]["correlation_id"], int)
