"""Shoal's own Fetch readers at read_committed, over a log a real transactional producer
(confluent-kafka) wrote: one transaction committed, one aborted with a plain record between its
batches, one left open, and a committed one after it.

Kafka's rules: the broker cuts a read_committed Fetch at the last stable offset (KIP-98; the
open transaction's first offset) and lists the aborted transactions; the consumer skips a
transactional batch of a producer whose aborted transaction starts at or before it, until that
producer's ABORT marker, and never returns control batches (`CompletedFetch` /
`FetchCollector`, apache/kafka clients/.../consumer/internals/). kafka-console-consumer.sh takes
`--isolation-level` (`ConsoleConsumerOptions`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from client.cluster import Cluster
from client.read_committed import LEVELS
from client.topic_reader import fetch_records
from tests.brokers import BrokerProcess
from tests.compat.support import COMMITTED
from tests.compat.support import EVERYTHING
from tests.compat.support import create_topic
from tests.compat.support import write_transactions
from tests.integration.test_cli import shoal

pytestmark = pytest.mark.compat

TOPIC = "ledger"


@pytest.fixture(scope="module", autouse=True)
def _transactions(module_broker_process: BrokerProcess) -> Iterator[None]:
    """The module's broker holds TOPIC with committed, aborted and one open transaction
    (aborted at the end)."""
    create_topic(module_broker_process.bootstrap, TOPIC, 1)
    open_one = write_transactions(module_broker_process.bootstrap, TOPIC)
    yield
    open_one.abort_transaction(30)


async def _read_all(bootstrap: str, isolation: str) -> list[str]:
    """`fetch_records` from offset 0 until a round moves the position no further."""
    cluster = Cluster(bootstrap, client_id="rc-test")
    positions, values = {(TOPIC, 0): 0}, []
    try:
        await cluster.bootstrap()
        for _ in range(50):
            got = await fetch_records(cluster, positions, 100, LEVELS[isolation])
            values += [(r.value or b"").decode() for r in got.records]
            nxt = got.next_offsets.get((TOPIC, 0), positions[(TOPIC, 0)])
            if nxt <= positions[(TOPIC, 0)]:
                break
            positions[(TOPIC, 0)] = nxt
    finally:
        await cluster.close()
    return values


@pytest.mark.parametrize(
    ("isolation", "expected"),
    [("read_committed", COMMITTED), ("read_uncommitted", EVERYTHING)],
)
def test_topic_reader_reads_what_its_isolation_level_allows(
    broker: BrokerProcess, isolation: str, expected: list[str]
) -> None:
    assert asyncio.run(_read_all(broker.bootstrap, isolation)) == expected


@pytest.mark.parametrize(
    ("isolation", "expected"),
    [("read_committed", COMMITTED), ("read_uncommitted", EVERYTHING)],
)
def test_console_consumer_isolation_level(
    broker: BrokerProcess, isolation: str, expected: list[str]
) -> None:
    code, out, err = shoal(
        "console-consumer", "--topic", TOPIC, "--from-beginning", "--isolation-level", isolation,
        "--timeout-ms", "1500", bootstrap=broker.bootstrap,
    )  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == expected
    assert f"Processed a total of {len(expected)} messages" in err
