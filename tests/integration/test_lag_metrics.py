"""Lag an operator can trust (issue 31, item 1), and the age of the oldest available record
(item 4): after a restart, before any client connects, every group with state has its lag
series; only data records count (share-state records in the user partition are no backlog,
for share groups and consumer groups alike); the CLI shows the number the metrics show.

Kafka computes a share-partition's lag as KIP-1226 defines it (log end - SPSO - delivery-complete
records) and kafka_exporter a consumer group's as log end - committed offset; both count a
control record (a transaction's marker) as lag. Shoal subtracts control batches by range.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from broker.server import Server
from client import AcknowledgeType
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import ShareConsumer
from tests.brokers import make_server
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.admin_support import poll_until
from tests.scrape import scrape

pytestmark = pytest.mark.integration

TOPIC = "jobs"
HOUR_MS = 3_600_000
SETTINGS: dict[str, object] = {"metrics.port": 0, **FAST_GROUPS}


CONNECTIONS = 'kafka_server_socket_server_metrics_connection_creation_total{listener="PLAINTEXT"}'


def _lag(group: str) -> str:
    return f'kafka_sharegroup_lag{{group="{group}",partition="0",topic="{TOPIC}"}}'


def _age(group: str) -> str:
    labels = f'group="{group}",partition="0",topic="{TOPIC}"'
    return f"kafka_sharegroup_oldest_available_age_seconds{{{labels}}}"


async def _consume(bootstrap: str, group: str, n: int, accept: int, commits: int = 1) -> None:
    """Take `n` records; accept the first `accept` of them in `commits` acknowledgements (a
    SHARE_DELTA each); the rest are released when the consumer closes."""
    async with ShareConsumer(bootstrap, group, acknowledgement_mode="explicit") as consumer:
        consumer.subscribe([TOPIC])
        records = await poll_until(consumer, n, timeout_s=20)
        assert len(records) == n
        step = max(accept // commits, 1)
        for i in range(0, accept, step):
            for record in records[i : min(i + step, accept)]:
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
            assert all(code == 0 for code in (await consumer.commit_sync()).values())


async def _work(bootstrap: str) -> None:
    """10 records an hour old; a consumer group caught up at once ("idle"); a share group that
    finishes everything ("finished") and one that accepts 4 and lets 6 go ("workers"); 3
    recent records; a consumer group caught up then ("caught"); more share state after it."""
    async with Admin(bootstrap) as admin:
        await admin.create_topic(TOPIC, 1)
        for group in ("workers", "finished"):
            await admin.incremental_alter_configs(
                ConfigResourceType.GROUP, group, {"share.auto.offset.reset": "earliest"}
            )
        async with Producer(bootstrap) as producer:
            old = int(time.time() * 1000) - HOUR_MS
            for i in range(10):
                await producer.send(TOPIC, b"old-%d" % i, partition=0, timestamp_ms=old)
        await admin.alter_consumer_group_offsets("idle", {(TOPIC, 0): 10})
        await _consume(bootstrap, "finished", 10, accept=10, commits=3)
        await _consume(bootstrap, "workers", 10, accept=4, commits=2)
        async with Producer(bootstrap) as producer:
            for i in range(3):
                await producer.send(TOPIC, b"new-%d" % i, partition=0)
        end = await admin.list_offsets(TOPIC, 0, "latest")
        await admin.alter_consumer_group_offsets("caught", {(TOPIC, 0): end})
        await _consume(bootstrap, "finished", 3, accept=3, commits=3)  # share state after it


async def _shoal(*args: str) -> dict[str, object]:
    """`shoal ARGS --json`, run without holding this loop (the broker runs in it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cli", *args, "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    result: dict[str, object] = json.loads(out)
    return result


async def _samples_once(server: Server, wanted: str) -> dict[str, float]:
    """The first scrape that shows `wanted` (the share-partitions load in the background)."""
    deadline = time.monotonic() + 20
    while True:
        samples = await scrape(server.metrics_port)
        if wanted in samples or time.monotonic() > deadline:
            return samples
        await asyncio.sleep(0.05)


async def test_lag_after_a_restart_counts_data_records_before_any_client_connects(
    tmp_path: Path,
) -> None:
    first = make_server(tmp_path / "data", **SETTINGS)
    await first.start()
    try:
        await _work(f"127.0.0.1:{first.port}")
    finally:
        await first.stop()

    broker = make_server(tmp_path / "data", **SETTINGS)
    await broker.start()
    try:
        samples = await _samples_once(broker, _lag("workers"))
        connections = (
            'kafka_server_socket_server_metrics_connection_creation_total{listener="PLAINTEXT"}'
        )
        assert samples[connections] == 0  # nobody has touched the groups yet
        # 6 released + 3 never delivered; the share-state records among them are not lag.
        assert samples[_lag("workers")] == 9
        assert samples['kafka_sharegroup_lag_sum{group="workers"}'] == 9
        assert samples[_lag("finished")] == 0  # its own share-state records come after its last
        assert samples['kafka_consumergroup_lag_sum{consumergroup="idle"}'] == 3
        assert samples['kafka_consumergroup_lag_sum{consumergroup="caught"}'] == 0
        # The oldest record "workers" can be given is an hour old (its producer's timestamp).
        assert HOUR_MS / 1000 - 60 < samples[_age("workers")] < HOUR_MS / 1000 + 60
        assert samples[_age("finished")] == 0

        # The CLI shows the same numbers.
        bootstrap = f"127.0.0.1:{broker.port}"
        described = await _shoal("share-groups", "describe", "--group", "workers",
                                 "--bootstrap-server", bootstrap)  # fmt: skip
        partitions = described["partitions"]
        assert isinstance(partitions, list) and partitions[0]["lag"] == samples[_lag("workers")]
        finished = await _shoal("share-groups", "describe", "--group", "finished",
                                "--bootstrap-server", bootstrap)  # fmt: skip
        assert finished["partitions"][0]["lag"] == 0  # type: ignore[index]
        for group, lag in (("idle", 3), ("caught", 0)):
            shown = await _shoal("consumer-groups", "--describe", "--group", group,
                                 "--bootstrap-server", bootstrap)  # fmt: skip
            assert shown["partitions"][0]["lag"] == lag, group  # type: ignore[index]
    finally:
        await broker.stop()


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return SETTINGS


async def test_share_state_records_are_no_backlog_for_any_group(broker: Server) -> None:
    """A consumer group caught up stays at 0 while a share group works the same partition, and
    a share group that accepted everything shows 0, though both have share-state records
    after their last record (on main: 0 became 6, and 2 where the CLI showed 0)."""
    bootstrap = f"127.0.0.1:{broker.port}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic(TOPIC, 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "done", {"share.auto.offset.reset": "earliest"}
        )
        async with Producer(bootstrap) as producer:
            for i in range(6):
                await producer.send(TOPIC, b"%d" % i, partition=0)
        await admin.alter_consumer_group_offsets("idle", {(TOPIC, 0): 6})
        await _consume(bootstrap, "done", 6, accept=6, commits=6)
        end = await admin.list_offsets(TOPIC, 0, "latest")
        offsets = await admin.describe_share_group_offsets("done")
    assert end > 6  # the share group's state went into the partition
    samples = await scrape(broker.metrics_port)
    assert samples['kafka_consumergroup_lag_sum{consumergroup="idle"}'] == 0
    assert samples[_lag("done")] == 0 == offsets[(TOPIC, 0)].lag
    assert samples[_age("done")] == 0
