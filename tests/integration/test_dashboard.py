"""The Grafana dashboard's queries, run by a real Prometheus scraping a real broker.

Skipped when the `prometheus` binary is absent (Debian: `apt-get install prometheus`). Every
panel's expression must parse and return series: a metric renamed in the broker, or a typo in
the dashboard, leaves a panel empty and fails here.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from client import AcknowledgeType
from client import Admin
from client import ConfigResourceType
from client import Producer
from client import ShareConsumer
from client.errors import KafkaError
from tests.brokers import BrokerProcess
from tests.brokers import free_port

pytestmark = pytest.mark.integration
DOCKER = Path(__file__).parents[2] / "docker"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "shoal.json"
PROMETHEUS = shutil.which("prometheus")


def panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]


def test_the_dashboard_is_provisioned_against_the_provisioned_datasource() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    grafana = compose["services"]["grafana"]
    assert ":" in grafana["image"] and not grafana["image"].endswith(":latest")
    mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    dashboards = yaml.safe_load((DOCKER / "grafana/provisioning/dashboards/shoal.yaml").read_text())
    path = dashboards["providers"][0]["options"]["path"]
    assert (DOCKER / mounts[path] / DASHBOARD.name).resolve() == DASHBOARD.resolve()
    sources = yaml.safe_load(
        (DOCKER / "grafana/provisioning/datasources/prometheus.yaml").read_text()
    )
    uid = sources["datasources"][0]["uid"]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert {p["datasource"]["uid"] for p in panels} == {uid}
    titles = " ".join(p["title"].lower() for p in panels)
    for wanted in ("acknowledgements by type", "acquired", "lag", "lock timeouts",
                   "archivals", "requests by api", "latency"):  # fmt: skip
        assert wanted in titles


async def _traffic(bootstrap: str) -> None:
    """Produce, then share-consume with acknowledgements of each kind; one refused request."""
    async with Admin(bootstrap) as admin:
        await admin.create_topic("orders", 1)
        with pytest.raises(KafkaError):  # TOPIC_ALREADY_EXISTS: something for the errors panel
            await admin.create_topic("orders", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "dash", {"share.auto.offset.reset": "earliest"}
        )
    async with Producer(bootstrap) as producer:
        for i in range(30):
            await producer.send("orders", b"order-%d" % i, partition=0)
    kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
    async with ShareConsumer(bootstrap, "dash", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["orders"])
        got: list[Any] = []
        for _ in range(40):
            got += await consumer.poll(0.5)
            if len(got) >= 30:
                break
        for i, record in enumerate(got[:20]):
            consumer.acknowledge(record, kinds[i % 3])
        await consumer.commit_sync()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker with metrics, some share traffic, and a Prometheus scraping it every second."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is not installed (Debian package prometheus)")
    metrics_port, web_port = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", extra=["--metrics-port", str(metrics_port)])
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump({
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [{
                "job_name": "shoal",
                "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
            }],
        })
    )  # fmt: skip
    with broker:
        asyncio.run(_traffic(broker.bootstrap))
        api = f"http://127.0.0.1:{web_port}/api/v1"
        with open(tmp_path / "prometheus.log", "wb") as log:
            proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{web_port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:  # three scrapes: enough for rate()
                    try:
                        result = _get(f"{api}/query?query=count_over_time(up%5B1m%5D)")
                        samples = result["data"]["result"]
                        if samples and float(samples[0]["value"][1]) >= 3:
                            break
                    except OSError:
                        pass
                    time.sleep(0.5)
                else:
                    pytest.fail((tmp_path / "prometheus.log").read_text()[-2000:])
                yield broker, api
            finally:
                proc.terminate()
                proc.wait(30)


def test_every_panel_query_parses_and_returns_series(
    prometheus: tuple[BrokerProcess, str],
) -> None:
    _, api = prometheus
    empty = []
    for title, expr in panel_queries():
        query = expr.replace("$__rate_interval", "30s")  # Grafana fills it in
        result = _get(f"{api}/query?query={urllib.parse.quote(query)}")
        assert result["status"] == "success", (title, query, result)
        if not result["data"]["result"]:
            empty.append((title, query))
    assert not empty, empty
