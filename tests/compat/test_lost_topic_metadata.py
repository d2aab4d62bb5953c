"""A broker restarted without its topic metadata files loses nothing (issue 9, item 2).

With `__topics/<id>.json` gone, the broker used to start without the topic, and the next
auto-create deleted the partition directory: 6,000 records gone. Now the topic is rebuilt from
its partition directories, with the same id, every record, and its share group's progress.
A garbled file stopped the whole broker (JSONDecodeError, exit 1; issue 28): it is set aside
and the topic rebuilt the same way, with one log line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import poll_records
from tests.compat.support import read_partition
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer

pytestmark = pytest.mark.compat

TOPIC, GROUP, RECORDS = "kept", "kept-group", 6000


def produce(bootstrap: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})  # auto-creates
    for i in values:
        p.produce(TOPIC, value=b"%d" % i, partition=0)
    assert p.flush(15) == 0


def read_values(bootstrap: str) -> list[int]:
    return [int(v) for v in read_partition(bootstrap, TOPIC)]


def share_consume(bootstrap: str, limit: int) -> list[int]:
    """Accept (implicitly) up to about `limit` records, then commit and leave."""
    sc = share_consumer(bootstrap, GROUP)
    sc.subscribe([TOPIC])
    got: list[int] = []
    for _ in range(60):
        got += [int(m.value()) for m in poll_records(sc)]
        if len(got) >= limit:
            break
    sc.commit_sync()
    sc.close()
    return got


@pytest.mark.parametrize("how", ["deleted", "garbled"])
def test_topics_come_back_from_their_partition_directories(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        set_group_configs(broker.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
        produce(broker.bootstrap, range(RECORDS))
        first = share_consume(broker.bootstrap, 1)
        assert first
        [meta] = (data / "__topics").glob("*.json")
        topic_id = json.loads(meta.read_text())["topic_id"]
        assert broker.stop() == 0
    if how == "garbled":
        meta.write_bytes(meta.read_bytes()[:40] + b"\xff\xfe\x00")  # cut, then noise
    else:
        meta.unlink()

    with BrokerProcess(data, port=broker.port) as broker:
        produce(broker.bootstrap, range(RECORDS, RECORDS + 1))  # auto-create finds it
        assert read_values(broker.bootstrap) == list(range(RECORDS + 1))
        rest = share_consume(broker.bootstrap, RECORDS + 1 - len(first))
        assert sorted(first + rest) == list(range(RECORDS + 1))  # nothing delivered twice
        broker.kill()
    [meta] = (data / "__topics").glob("*.json")
    assert json.loads(meta.read_text())["topic_id"] == topic_id
    lines = [json.loads(x) for x in broker.log_path.read_text().splitlines() if x[:1] == "{"]
    [rebuilt] = [e for e in lines if e["event"].startswith("topic rebuilt from its partition")]
    if how == "garbled":  # kept for the operator, named in that one line
        [kept] = (data / "__topics").glob(f"{meta.name}.corrupt-*")
        assert (
            rebuilt["metadata_file"].startswith("unreadable")
            and kept.name in rebuilt["metadata_file"]
        )
    else:
        assert rebuilt["metadata_file"] == "missing"
    assert not [e for e in lines if e["level"] in ("error", "critical")]
