"""`kafka.isolation.level` in the shoal Spark source, over a log a real transactional producer
(confluent-kafka) wrote (`tests.compat.support.write_transactions`: committed, aborted with a
plain record inside, one left open, one committed past it).

A batch read at read_committed ends at the last stable offset ("latest" is the LSO, as
ListOffsets answers a read_committed client, KIP-98) and drops the aborted records, as Kafka's
consumer does (`CompletedFetch`); read_uncommitted, the default (Spark's Kafka source leaves
`isolation.level` to the Kafka consumer, whose default it is), reads everything. A stream reads
through a share group, whose `share.isolation.level` the source does not set yet:
read_committed is refused at load() rather than read as read_uncommitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokers import BrokerProcess
from tests.compat.support import COMMITTED
from tests.compat.support import EVERYTHING
from tests.compat.support import write_transactions
from tests.spark.conftest import create_topic

pytestmark = pytest.mark.spark

TOPIC = "ledger"


@pytest.fixture(scope="module")
def written(broker: BrokerProcess) -> Iterator[str]:
    create_topic(broker.bootstrap, TOPIC, 1)
    open_one = write_transactions(broker.bootstrap, TOPIC)
    yield broker.bootstrap
    open_one.abort_transaction(30)


def test_batch_read_committed_reads_exactly_the_committed_records(spark: Any, written: str) -> None:
    def values(**options: str) -> list[str]:
        df = spark.read.format("shoal").options(
            **{"kafka.bootstrap.servers": written, "subscribe": TOPIC}, **options
        )
        rows = df.load().select("offset", "value").collect()
        return [r.value.decode() for r in sorted(rows, key=lambda r: r.offset)]

    assert values(**{"kafka.isolation.level": "read_committed"}) == COMMITTED
    assert values() == EVERYTHING

    stream = spark.readStream.format("shoal").options(
        **{"kafka.bootstrap.servers": written, "subscribe": TOPIC, "group": "g",
           "kafka.isolation.level": "read_committed"}
    )  # fmt: skip
    with pytest.raises(Exception, match=r"share\.isolation\.level") as refused:
        stream.load()
    assert "kafka.isolation.level=read_committed" in str(refused.value)
