"""ListOffsets MAX_TIMESTAMP (KIP-734) through confluent-kafka's AdminClient.

Records go in with explicit, out-of-order CreateTime timestamps, and a ShareConsumer
acknowledges them, so the partition also holds share-state control batches stamped with the
broker's (later) clock. The answer is the first data record with the largest timestamp, before
and after a graceful restart and after kill -9.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.support import start_broker

pytestmark = pytest.mark.compat

TOPIC, GROUP = "stamped", "stamped-readers"
# An hour ago: the share state written while the test runs is stamped later than every record.
T0 = int(time.time() * 1000) - 3_600_000
STAMPS = [T0 + 100, T0 + 50, T0 + 900, T0 + 200, T0 + 900, T0 + 300]  # offset 2 wins the tie


def _list(bootstrap: str, spec: OffsetSpec) -> tuple[int, int]:
    tp = TopicPartition(TOPIC, 0)
    client = admin(bootstrap)  # kept until the future is done
    info = client.list_offsets({tp: spec})[tp].result(10)
    return info.offset, info.timestamp


def _produce(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **QUIET})
    for i, ts in enumerate(STAMPS):
        p.produce(TOPIC, value=b"v%d" % i, partition=0, timestamp=ts)
    assert p.flush(20) == 0


def _accept_everything(bootstrap: str) -> None:
    """A share consumer reads and accepts every record: SHARE_DELTA batches follow them."""
    c = share_consumer(bootstrap, GROUP)
    c.subscribe([TOPIC])
    try:
        got = 0
        deadline = time.monotonic() + 20
        while got < len(STAMPS) and time.monotonic() < deadline:
            got += len(poll_records(c, 0.5))
        assert got == len(STAMPS)
        c.commit_sync(10)
    finally:
        c.close()


def test_max_timestamp_answers_the_data_record_not_share_state(tmp_path: Path) -> None:
    broker: BrokerProcess = start_broker(tmp_path / "data")
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        assert _list(broker.bootstrap, OffsetSpec.max_timestamp()) == (-1, -1)  # empty
        set_group_configs(broker.bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})
        _produce(broker.bootstrap)
        _accept_everything(broker.bootstrap)
        end, _ = _list(broker.bootstrap, OffsetSpec.latest())
        assert end > len(STAMPS), "the share group wrote no control batch"
        answers = [_list(broker.bootstrap, OffsetSpec.max_timestamp())]
        assert broker.stop() == 0, broker.log()
        broker.start()
        answers.append(_list(broker.bootstrap, OffsetSpec.max_timestamp()))
        broker.kill()
        broker.start()
        answers.append(_list(broker.bootstrap, OffsetSpec.max_timestamp()))
    finally:
        broker.stop()
    assert answers == [(2, T0 + 900)] * 3
