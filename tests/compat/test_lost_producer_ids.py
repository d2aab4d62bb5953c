"""A lost or garbled `producer-ids` file never hands a producer id out twice (issue 28).

That file was the only record of the ids handed out. Deleted, the restarted broker gave the
next idempotent producer PID 0 again: its first batch (sequence 0-4) matched the old producer's
cached batch and was answered as a duplicate with the old offsets, never written (5 of 5
acknowledged records lost, nothing logged); garbled, the broker did not start. Kafka never
reissues an id: its controller hands them out in blocks recorded in the metadata log before use
(`ProducerIdControlManager`, `ProducerIdsRecord`: metadata/src/main/java/org/apache/kafka/
controller/ProducerIdControlManager.java). Here the allocator also starts above every id the
partitions' producer state holds (snapshots, or batch headers where there is none), and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Message
from confluent_kafka import Producer

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.support import read_partition

pytestmark = pytest.mark.compat

TOPIC = "pids"
REBUILT = "producer-ids file rebuilt from the partitions' producer state"


def produce_five(bootstrap: str, first: int) -> list[tuple[int, int]]:
    """Five records from a new idempotent producer, in one batch (sequence 0-4): the
    (value, offset) of each delivery report."""
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((int(msg.value()), msg.offset()))

    p = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 100, **QUIET}
    )
    for i in range(first, first + 5):
        p.produce(TOPIC, value=b"%d" % i, partition=0, on_delivery=report)
    assert p.flush(15) == 0
    assert not errors, errors
    return delivered


def damage(data: Path, how: str) -> None:
    ids = data / "producer-ids"
    if how == "garbled":
        ids.write_bytes(b"\xff\xfe\x00 not a number")
        return
    ids.unlink()
    if how == "deleted-with-snapshots":
        for snapshot in data.glob("*/producer_state.json"):
            snapshot.unlink()


@pytest.mark.parametrize("how", ["deleted", "garbled", "deleted-with-snapshots"])
def test_a_new_producer_never_gets_an_old_producer_id(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as broker:
        create_topic(broker.bootstrap, TOPIC, 1)
        assert produce_five(broker.bootstrap, 0) == [(i, i) for i in range(5)]
        if how == "deleted-with-snapshots":
            broker.kill()  # no clean close: no snapshot either; ids only in batch headers
        else:
            assert broker.stop() == 0
    damage(data, how)
    if how == "deleted-with-snapshots":
        assert not list(data.glob("*/producer_state.json"))

    with BrokerProcess(data, port=broker.port) as broker:
        # Written, at new offsets: not taken for the old producer's retry.
        assert produce_five(broker.bootstrap, 5) == [(i, i) for i in range(5, 10)]
        assert read_partition(broker.bootstrap, TOPIC) == [b"%d" % i for i in range(10)]
        assert broker.stop() == 0
    lines = [json.loads(x) for x in broker.log_path.read_text().splitlines() if x.startswith("{")]
    [rebuilt] = [e for e in lines if e.get("event") == REBUILT]
    assert rebuilt["level"] == "warning"
    assert rebuilt["highest_recorded_id"] == 0 and rebuilt["next_id"] == 2000
    assert int((data / "producer-ids").read_text()) > 2000  # the block now handed out from
