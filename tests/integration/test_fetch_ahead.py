"""`spark.fetcher.Fetcher.arrow_ranges` against a broker process: a task's ranges read in
turn with one Fetch ahead (sent before the current answer is decoded and handed on), every
record once, and a reader closed early (a LIMIT) leaves the connection usable."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from client.admin import Admin
from client.producer import Producer
from client.records import Record
from tests.brokers import BrokerProcess

pytest.importorskip("pyspark")  # spark/__init__ imports the data source, which needs PySpark
from spark import fetcher as fetcher_module
from spark.fetcher import Fetcher
from spark.fetcher import OffsetRange
from spark.fetcher import task_loop

pytestmark = pytest.mark.integration

TOPIC = "ahead"
PER_PARTITION = 600  # in batches of 50, ~150 B each: 16 KiB Fetches bring ~2 batches


def _value(partition: int, offset: int) -> bytes:
    return b"%d-%d-" % (partition, offset) + b"x" * 140


async def _produce(bootstrap: str) -> None:
    async with Admin(bootstrap) as admin, Producer(bootstrap) as producer:
        await admin.create_topic(TOPIC, 2)
        for p in range(2):
            for first in range(0, PER_PARTITION, 50):
                batch = [Record(_value(p, o)) for o in range(first, first + 50)]
                await producer.send_batch(TOPIC, p, batch)


def _counting_fetches(fetcher: Fetcher) -> list[int]:
    """The MaxBytes of each Fetch request `fetcher` makes, listed as they are made."""
    made: list[int] = []
    request = fetcher.cluster.request

    def counted(body: Any, **kwargs: Any) -> Any:
        if type(body).__name__ == "FetchRequest":
            made.append(body.max_bytes)
        return request(body, **kwargs)

    fetcher.cluster.request = counted  # type: ignore[method-assign]
    return made


def test_ranges_in_turn_with_the_next_fetch_already_sent(
    broker_process: BrokerProcess, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetcher_module, "_FIRST_FETCH_BYTES", 4096)
    asyncio.run(_produce(broker_process.bootstrap))
    ranges = [
        (OffsetRange(TOPIC, 0, 7, 431), None),
        (OffsetRange(TOPIC, 1, 5, 5), 9),  # empty: skipped
        (OffsetRange(TOPIC, 1, 0, PER_PARTITION), 2),
    ]
    with caplog.at_level(logging.ERROR, logger="asyncio"), task_loop() as loop:
        fetcher = Fetcher(broker_process.bootstrap)
        try:
            made = _counting_fetches(fetcher)
            got: list[tuple[int, int, bytes, int | None]] = []
            made_at_yield = []
            for batch in fetcher.arrow_ranges(loop, ranges, 16 * 1024):
                made_at_yield.append(len(made))
                cols = batch.to_pydict()
                got += zip(
                    cols["partition"], cols["offset"], cols["value"], cols["deliveryCount"],
                    strict=True,
                )  # fmt: skip
            want = [(0, o, _value(0, o), None) for o in range(7, 431)]
            want += [(1, o, _value(1, o), 2) for o in range(PER_PARTITION)]
            assert got == want
            # When the k-th batch reached the caller, Fetch k+1 had been made (the last: none).
            n = len(made_at_yield)
            assert n > 10 and made_at_yield == [*range(2, n + 1), n]
            # The first Fetch asks less, to start sooner; the rest ask the full size.
            assert made == [4096] + [16 * 1024] * (n - 1)

            # Closed after its first batch (as under a LIMIT): the Fetch ahead is dropped, and
            # the same connection then answers the next reader correctly.
            early = fetcher.arrow_ranges(loop, [(OffsetRange(TOPIC, 0, 0, 600), None)], 4096)
            first = next(early)
            early.close()
            again = list(fetcher.arrow_ranges(loop, [(OffsetRange(TOPIC, 0, 590, 600), 1)], 4096))
            assert [o for b in again for o in b.column("offset").to_pylist()] == list(
                range(590, 600)
            )
            assert first.column("offset")[0].as_py() == 0
        finally:
            loop.run_until_complete(fetcher.close())
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.records
