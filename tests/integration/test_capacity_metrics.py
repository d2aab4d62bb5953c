"""Capacity signals on a real broker's /metrics (issue 31, items 2 and 3): log size per
partition, bytes and messages in per topic, requests per API, the process collector, and no
series left behind by a deleted topic.

Names as the Prometheus JMX exporter writes Kafka's MBeans: `kafka.log:type=Log,name=Size,
topic=T,partition=P` is `kafka_log_log_size{topic,partition}`; BrokerTopicMetrics'
`MessagesInPerSec,topic=T` is `kafka_server_brokertopicmetrics_messagesin_total{topic}`
(counted as ReplicaManager.appendToLocalLog marks it: the records each append was given).
Kafka removes a deleted topic's BrokerTopicMetrics (BrokerTopicStats.removeMetrics, called
by ReplicaManager when a partition is deleted).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.server import Server
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import ShareConsumer
from tests.integration.admin_support import poll_until
from tests.scrape import scrape
from tests.scrape import scrape_text

pytestmark = pytest.mark.integration

TOPICS = "kafka_server_brokertopicmetrics"


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"metrics.port": 0}


async def test_log_size_messages_in_requests_and_process(broker: Server) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic("cap", 2)
    async with Producer(bootstrap) as producer:
        for i in range(5):
            await producer.send("cap", b"record-%d" % i, partition=0)
        await producer.send("cap", b"one", partition=1)

    samples = await scrape(broker.metrics_port)
    t = '{topic="cap"}'
    assert samples[f"{TOPICS}_messagesin_total{t}"] == 6
    assert samples[f"{TOPICS}_bytesin_bytes_total{t}"] > 6 * len(b"record-0")
    for partition in (0, 1):
        files = (broker.config.data_dir / f"cap-{partition}").glob("*.log")
        on_disk = sum(p.stat().st_size for p in files)
        size = samples[f'kafka_log_log_size{{partition="{partition}",topic="cap"}}']
        assert size == on_disk > 0
    produce = '{request="Produce"}'
    assert samples[f"kafka_network_requestmetrics_requests_total{produce}"] >= 6
    assert samples[f"kafka_network_requestmetrics_totaltime_seconds_count{produce}"] >= 6
    if Path("/proc/self/stat").exists():  # prometheus-client's ProcessCollector reads /proc
        assert samples["process_cpu_seconds_total"] > 0
        assert samples["process_resident_memory_bytes"] > 0
        assert samples["process_open_fds"] > 0
        assert samples["process_max_fds"] >= samples["process_open_fds"]


async def test_a_deleted_topic_leaves_no_series(broker: Server) -> None:
    """Produced, share-fetched and acknowledged, then deleted: no per-topic series of it is
    left (bytes and messages in, bytes out, share fetch and acknowledgement counts, log
    size, share lag); another topic's stay."""
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        for name in ("gone", "kept"):
            await admin.create_topic(name, 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "g", {"share.auto.offset.reset": "earliest"}
        )
        async with Producer(bootstrap) as producer:
            for name in ("gone", "kept"):
                await producer.send(name, b"x", partition=0)
        async with ShareConsumer(bootstrap, "g", acknowledgement_mode="explicit") as consumer:
            consumer.subscribe(["gone", "kept"])
            records = await poll_until(consumer, 2, timeout_s=20)
            assert len(records) == 2
            for record in records:
                consumer.acknowledge(record)
            await consumer.commit_sync()
        before = await scrape(broker.metrics_port)
        assert f'{TOPICS}_totalsharefetchrequestspersec_total{{topic="gone"}}' in before
        assert 'kafka_sharegroup_lag{group="g",partition="0",topic="gone"}' in before
        await admin.delete_topic("gone")
    after = await scrape(broker.metrics_port)
    assert [name for name in after if 'topic="gone"' in name] == []
    assert f'{TOPICS}_messagesin_total{{topic="kept"}}' in after
    assert 'kafka_log_log_size{partition="0",topic="kept"}' in after


async def test_the_readme_table_lists_every_metric_served(broker: Server) -> None:
    """The README's metrics table names every metric family /metrics serves, with a unit,
    and nothing it does not serve."""
    page = await scrape_text(broker.metrics_port)
    served = {line.split()[2] for line in page.splitlines() if line.startswith("# TYPE ")}
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    rows = [line.split("|")[1:-1] for line in readme.splitlines() if line.startswith("| `")]
    table = {cells[0].strip().strip("`"): cells[2].strip() for cells in rows}
    assert served - set(table) == set()
    # prometheus-client's process collector serves nothing where /proc is not (macOS).
    absent = set() if Path("/proc/self/stat").exists() else {n for n in table if "process_" in n}
    assert set(table) - served - absent == set()
    assert all(table.values()), [name for name, unit in table.items() if not unit]
