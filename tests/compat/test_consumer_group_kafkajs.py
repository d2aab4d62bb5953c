"""KafkaJS (npm `kafkajs`) consumes with a consumer group: `tests/compat/js/consume_group.js`.

The test installs kafkajs into a directory of its own with npm; it is skipped, with the
reason, when node or npm is absent or the npm registry cannot be reached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import create_topic

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed"),
]

SCRIPT = Path(__file__).parent / "js" / "consume_group.js"


@pytest.fixture(scope="module")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("kafkajs")
    try:
        run = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", "kafkajs@2"],
            cwd=where, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.skip("npm install kafkajs timed out: is the npm registry reachable?")
    if run.returncode != 0:
        pytest.skip(f"npm install kafkajs failed (registry unreachable?): {run.stderr[-300:]}")
    return where / "node_modules"


BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 100}
BROKER_PER_TEST = True  # each test starts from an empty broker


def test_kafkajs_consumer_in_a_group_reads_every_record(
    broker: BrokerProcess, node_modules: Path
) -> None:
    create_topic(broker.bootstrap, "js-topic", 2)
    values = [f"js-{i}" for i in range(20)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for i, value in enumerate(values):
        producer.produce("js-topic", value=value.encode(), partition=i % 2)
    assert producer.flush(10) == 0
    run = subprocess.run(
        ["node", str(SCRIPT), broker.bootstrap, "js-group", "js-topic", str(len(values))],
        capture_output=True, text=True, timeout=90,
        env={**os.environ, "NODE_PATH": str(node_modules)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert sorted(run.stdout.split()) == sorted(values)
