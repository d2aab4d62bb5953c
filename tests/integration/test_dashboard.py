"""The Grafana dashboard's queries, and the README's KEDA ScaledObject, run by a real
Prometheus scraping a real broker.

Skipped when the `prometheus` binary is absent (Debian: `apt-get install prometheus`). Every
panel's expression (with `$topic`/`$group` at their "All" value) and every variable's query
must parse and return series: a metric renamed in the broker, or a typo in the dashboard,
leaves a panel empty and fails here. KEDA's Prometheus scaler needs each query to return one
element (a vector of one, or a scalar: keda.sh/docs/scalers/prometheus).
"""

from __future__ import annotations

import asyncio
import json
import re
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


README = Path(__file__).parents[2] / "README.md"
# Grafana's values for its own variables: "All" is the custom all value `.*`.
VARIABLES = {"$__rate_interval": "30s", "$topic": ".*", "$group": ".*"}


def panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]


def variables() -> dict[str, dict[str, Any]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def scaled_object() -> dict[str, Any]:
    """The README's KEDA ScaledObject (the yaml block this file covers)."""
    marker = "<!-- readme-test: tests/integration/test_dashboard.py -->\n```yaml\n"
    text = README.read_text()
    start = text.index(marker) + len(marker)
    loaded: dict[str, Any] = yaml.safe_load(text[start : text.index("```", start)])
    return loaded


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
    assert sources["datasources"][0]["type"] == "prometheus"
    dashboard = json.loads(DASHBOARD.read_text())
    # No hard-coded datasource: every panel and query reads the $datasource variable, which
    # offers the Prometheus datasources Grafana has (the provisioned one among them).
    source = variables()["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    wanted_source = {"type": "prometheus", "uid": "${datasource}"}
    for p in dashboard["panels"]:
        assert p["datasource"] == wanted_source, p["title"]
        assert all(t.get("datasource", wanted_source) == wanted_source for t in p["targets"])
    for name in ("topic", "group"):
        assert variables()[name]["datasource"] == wanted_source
        assert variables()[name]["includeAll"] and variables()[name]["allValue"] == ".*"
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for wanted in ("acknowledgements by type", "acquired", "lag", "lock timeouts",
                   "archivals", "requests by api", "latency", "consumer group lag",
                   "log size", "connections", "oldest"):  # fmt: skip
        assert wanted in titles
    # Per-topic and per-group panels follow the variables.
    for _, expr in panel_queries():
        if "brokertopicmetrics" in expr or "kafka_log_log_size" in expr:
            assert 'topic=~"$topic"' in expr, expr
        if "lag_sum" in expr:
            assert 'group=~"$group"' in expr, expr


async def _traffic(bootstrap: str) -> None:
    """Produce, then share-consume with acknowledgements of each kind (the share group and
    topic of the README's ScaledObject); a consumer group's commit; one refused request."""
    async with Admin(bootstrap) as admin:
        await admin.create_topic("jobs", 1)
        with pytest.raises(KafkaError):  # TOPIC_ALREADY_EXISTS: something for the errors panel
            await admin.create_topic("jobs", 1)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, "workers", {"share.auto.offset.reset": "earliest"}
        )
        async with Producer(bootstrap) as producer:
            for i in range(30):
                await producer.send("jobs", b"job-%d" % i, partition=0)
        await admin.alter_consumer_group_offsets("reports", {("jobs", 0): 5})
    kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT]
    async with ShareConsumer(bootstrap, "workers", acknowledgement_mode="explicit") as consumer:
        consumer.subscribe(["jobs"])
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
        query = expr
        for name, value in VARIABLES.items():  # Grafana fills these in
            query = query.replace(name, value)
        result = _get(f"{api}/query?query={urllib.parse.quote(query)}")
        assert result["status"] == "success", (title, query, result)
        if not result["data"]["result"]:
            empty.append((title, query))
    assert not empty, empty


def _query(api: str, expr: str) -> list[dict[str, Any]]:
    result = _get(f"{api}/query?query={urllib.parse.quote(expr)}")
    assert result["status"] == "success", (expr, result)
    rows: list[dict[str, Any]] = result["data"]["result"]
    return rows


def test_the_variables_offer_the_topics_and_groups(prometheus: tuple[BrokerProcess, str]) -> None:
    """What Grafana runs for `$topic` (label_values) and `$group` (query_result and regex:
    share groups and consumer groups under one name)."""
    _, api = prometheus
    topic = variables()["topic"]["query"]["query"]
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", topic).groups()  # type: ignore[union-attr]
    topics = {row["metric"][label] for row in _query(api, metric)}
    assert "jobs" in topics
    group = variables()["group"]
    expr = re.fullmatch(r"query_result\((.*)\)", group["query"]["query"]).group(1)  # type: ignore[union-attr]
    pattern = re.compile(group["regex"].strip("/"))
    groups = set()
    for row in _query(api, expr):
        shown = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(row["metric"].items())) + "}"
        groups.update(pattern.findall(shown))
    assert {"workers", "reports"} <= groups


def test_the_readme_scaled_object_queries_return_one_value_each(
    prometheus: tuple[BrokerProcess, str],
) -> None:
    _, api = prometheus
    spec = scaled_object()
    assert (spec["apiVersion"], spec["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    triggers = spec["spec"]["triggers"]
    assert [t["type"] for t in triggers] == ["prometheus", "prometheus"]
    values = {}
    for trigger in triggers:
        meta = trigger["metadata"]
        assert meta["serverAddress"].startswith("http") and float(meta["threshold"]) > 0
        rows = _query(api, meta["query"])
        assert len(rows) == 1, (meta["query"], rows)  # KEDA refuses more than one element
        values[meta["query"].split("(")[1].split("{")[0]] = float(rows[0]["value"][1])
        # A group with no series yet reads 0, not "no data".
        unknown = meta["query"].replace('group="workers"', 'group="nobody"')
        assert [float(r["value"][1]) for r in _query(api, unknown)] == [0.0]
    # 30 produced, 20 acknowledged of which 7 released, and the rest released on close (or
    # never delivered): 7 + 10 still to do.
    assert values["kafka_sharegroup_lag"] == 17
    assert values["kafka_sharegroup_oldest_available_age_seconds"] > 0
