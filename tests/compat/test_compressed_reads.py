"""Topics written by confluent-kafka's Producer with `compression.type` set are read back
completely by Shoal's own client: plain Fetch into Arrow (`client.arrow_batches`, the Spark
source's path) and the ShareConsumer (`client.records`)."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer

from client.admin import Admin
from client.admin import ConfigResourceType
from client.records import ConsumerRecord
from client.share_consumer import ShareConsumer
from protocol.record_batch import iter_batch_headers
from tests.brokers import BrokerProcess
from tests.compat.support import QUIET

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")  # spark.fetcher is the plain Fetch reader; its package needs it
from client.arrow_batches import batches_to_arrow  # noqa: E402
from spark.fetcher import Fetcher  # noqa: E402

pytestmark = pytest.mark.compat

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COUNT = 3000
BASE_TS = 1_700_000_000_000


def _record(i: int) -> tuple[bytes | None, bytes, list[tuple[str, bytes | None]]]:
    key = None if i % 7 == 0 else b"key-%d" % i
    value = b"value %d " % i * (1 + i % 20)  # ~100 B on average, compressible
    headers: list[tuple[str, bytes | None]] = [("n", b"%d" % i)] if i % 3 == 0 else []
    return key, value, headers


def _produce(bootstrap: str, topic: str, codec: str) -> None:
    errors: list[object] = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
         "compression.type": codec, **QUIET}
    )  # fmt: skip
    for i in range(COUNT):
        key, value, headers = _record(i)
        producer.produce(
            topic, value=value, key=key, headers=headers, timestamp=BASE_TS + i,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )  # fmt: skip
    assert producer.flush(30) == 0
    assert errors == [], errors[:3]


async def _fetch_all(bootstrap: str, topic: str) -> tuple[pa.RecordBatch, set[int]]:
    """Every record of partition 0 through Fetch and batches_to_arrow, and the codecs seen."""
    fetcher = Fetcher(bootstrap)
    parts, codecs, offset = [], set(), 0
    try:
        while offset < COUNT:
            data, _ = await fetcher.fetch(topic, 0, offset, 256 * 1024)
            parts.append(batches_to_arrow(data, topic=topic, partition=0, first=offset))
            headers = [h for _, h in iter_batch_headers(data)]
            codecs |= {h.compression for h in headers}
            offset = headers[-1].last_offset + 1
    finally:
        await fetcher.close()
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0], codecs


async def _share_all(bootstrap: str, topic: str) -> list[ConsumerRecord]:
    group = f"readers-{topic}"
    async with Admin(bootstrap) as admin:
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, group, {"share.auto.offset.reset": "earliest"}
        )
    out: list[ConsumerRecord] = []
    async with ShareConsumer(bootstrap, group) as consumer:
        consumer.subscribe([topic])
        deadline = asyncio.get_running_loop().time() + 30
        while len(out) < COUNT and asyncio.get_running_loop().time() < deadline:
            out.extend(await consumer.poll(0.5))
    return out


@pytest.mark.parametrize("codec", list(CODECS))
async def test_compressed_topic_is_read_back_completely(
    broker_process: BrokerProcess, codec: str
) -> None:
    topic = f"compressed-{codec}"
    async with Admin(broker_process.bootstrap) as admin:
        await admin.create_topic(topic, 1)
    await asyncio.to_thread(_produce, broker_process.bootstrap, topic, codec)
    expected = [_record(i) for i in range(COUNT)]

    rb, codecs = await _fetch_all(broker_process.bootstrap, topic)
    assert CODECS[codec] in codecs, codecs  # the batches really are compressed
    assert rb.column("offset").to_pylist() == list(range(COUNT))
    assert rb.column("key").to_pylist() == [k for k, _, _ in expected]
    assert rb.column("value").to_pylist() == [v for _, v, _ in expected]
    assert rb.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in h] for _, _, h in expected
    ]
    assert rb.column("timestamp").cast(pa.int64()).to_pylist() == [
        (BASE_TS + i) * 1000 for i in range(COUNT)
    ]

    shared = sorted(await _share_all(broker_process.bootstrap, topic), key=lambda r: r.offset)
    assert [r.offset for r in shared] == list(range(COUNT))
    assert [(r.key, r.value, r.headers) for r in shared] == expected
