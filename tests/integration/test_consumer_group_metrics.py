"""Consumer groups as an operator sees them: /metrics of a broker process (groups by state for
both protocols, rebalances, lag per group with its cap) and its JSON log lines for joins,
leaves, rebalances and offset resets, with group and client id."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer

from broker.group_lag import MAX_GROUPS
from client import Admin
from tests.brokers import BrokerProcess
from tests.brokers import free_port
from tests.compat.support import create_topic

pytestmark = pytest.mark.integration

COORDINATOR = "kafka_server_groupcoordinatormetrics"
TOPIC = "metered"
CONFIG = {
    "group.initial.rebalance.delay.ms": 100,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "group.consumer.heartbeat.interval.ms": 500,
}


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for i in range(count):
        producer.produce(TOPIC, value=b"%d" % i, partition=i % 2)
    assert producer.flush(10) == 0


def _consume_all(bootstrap: str, group: str, protocol: str, client: str, n: int) -> Consumer:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client,
         "group.protocol": protocol, "enable.auto.commit": False,
         "auto.offset.reset": "earliest", "log_level": 0}
    )  # fmt: skip
    consumer.subscribe([TOPIC])
    read, deadline = 0, time.monotonic() + 60
    while read < n:
        assert time.monotonic() < deadline, f"{group} read {read} of {n}"
        read += len([m for m in consumer.consume(100, 0.2) if m.error() is None])
    consumer.commit(asynchronous=False)
    return consumer


def _logged(proc: BrokerProcess, event: str, **fields: Any) -> list[dict[str, Any]]:
    records = [json.loads(x) for x in proc.log_path.read_text().splitlines() if x.startswith("{")]
    return [
        r for r in records if r["event"] == event and all(r.get(k) == v for k, v in fields.items())
    ]


async def _commit_for_groups(bootstrap: str, groups: list[str]) -> None:
    async with Admin(bootstrap) as admin:
        for group in groups:
            await admin.alter_consumer_group_offsets(group, {(TOPIC, 0): 1})


def test_group_counts_rebalances_lag_and_logs(tmp_path: Path) -> None:
    props = tmp_path / "broker.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in CONFIG.items()))
    metrics = free_port()
    extra = ["--config", str(props), "--metrics-port", str(metrics)]
    with BrokerProcess(tmp_path / "data", extra=extra) as proc:
        b = proc.bootstrap
        create_topic(b, TOPIC, 2)
        _produce(b, 20)
        classic = _consume_all(b, "audit-classic", "classic", "auditor-c", 20)
        modern = _consume_all(b, "audit-848", "consumer", "auditor-k", 20)
        _produce(b, 6)  # 3 a partition: each group lags 6 behind its commits
        live = _scrape(metrics)
        assert live[f'{COORDINATOR}_classicgroupcount{{state="Stable"}}'] == 1
        assert live[f'{COORDINATOR}_consumergroupcount{{state="Stable"}}'] == 1
        assert live[f'{COORDINATOR}_consumergroupcount{{state="Empty"}}'] == 0
        assert live[f"{COORDINATOR}_classicgrouprebalance_total"] >= 1
        assert live[f"{COORDINATOR}_consumergrouprebalance_total"] >= 1
        assert live['kafka_consumergroup_lag_sum{consumergroup="audit-classic"}'] == 6
        assert live['kafka_consumergroup_lag_sum{consumergroup="audit-848"}'] == 6

        classic.close()
        modern.close()
        left = _scrape(metrics)
        assert left[f'{COORDINATOR}_classicgroupcount{{state="Empty"}}'] == 1
        assert left[f'{COORDINATOR}_consumergroupcount{{state="Empty"}}'] == 1
        assert left[f'{COORDINATOR}_consumergroupcount{{state="Stable"}}'] == 0
        classic_rebalances = f"{COORDINATOR}_classicgrouprebalance_total"
        assert left[classic_rebalances] > live[classic_rebalances]  # the leave emptied it

        # An admin reset of the emptied group is logged; so is the lag cap, once.
        asyncio.run(_commit_for_groups(b, ["audit-classic"]))
        bulk = [f"bulk-{i}" for i in range(MAX_GROUPS)]
        asyncio.run(_commit_for_groups(b, bulk))
        capped = _scrape(metrics)
        assert capped["shoal_consumergroup_lag_groups_omitted"] == 2
        assert sum(k.startswith("kafka_consumergroup_lag_sum{") for k in capped) == MAX_GROUPS
        _scrape(metrics)
        proc.stop()

        def once(event: str, **fields: Any) -> dict[str, Any]:
            found = _logged(proc, event, **fields)
            assert len(found) == 1, (event, fields, found)
            return found[0]

        once("member joining", group="audit-classic", client="auditor-c")
        once("member removed", group="audit-classic", client="auditor-c")
        assert _logged(proc, "rebalance completed", group="audit-classic")
        once("consumer joined", group="audit-848", client="auditor-k")
        once("consumer left", group="audit-848", client="auditor-k", reason="left")
        assert _logged(proc, "rebalance: new target assignment", group="audit-848")
        reset = once("offsets reset", group="audit-classic")
        assert reset["client"] and reset["partitions"] == 1 and reset["rewound"] == 1
        capped_line = once("consumer-group lag metric capped")
        assert capped_line["omitted"] == 2
