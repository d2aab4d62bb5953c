"""The client's Producer against a real broker over a real socket."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.server import Server
from client.admin import Admin
from client.errors import KafkaError
from client.producer import CODECS
from client.producer import Producer
from client.producer import default_partition
from client.producer import murmur2
from client.records import AcquiredRange
from client.records import ConsumerRecord
from client.records import Record
from client.records import decode_acquired
from client.records import encode_batch
from protocol.record_batch import parse_header

pytestmark = pytest.mark.integration


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


def test_murmur2_matches_kafka() -> None:
    # Vectors from Kafka's UtilsTest.testMurmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


async def test_send_auto_creates_topic_and_assigns_consecutive_offsets(server: Server) -> None:
    async with Producer(_bootstrap(server)) as producer:
        results = [await producer.send("auto", b"v%d" % i, partition=0) for i in range(5)]
    assert results == [(0, i) for i in range(5)]
    async with Admin(_bootstrap(server)) as admin:
        assert "auto" in await admin.list_topics()
        assert await admin.list_offsets("auto", 0, "latest") == 5


async def test_keyed_records_follow_the_default_partitioner(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        await admin.create_topic("keyed", 4)
    async with Producer(_bootstrap(server)) as producer:
        for key in (b"alpha", b"beta", b"gamma", b"delta", b"alpha"):
            partition, _ = await producer.send("keyed", b"x", key=key)
            assert partition == default_partition(key, 4)


async def test_keyless_records_go_round_robin(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        await admin.create_topic("rr", 3)
    async with Producer(_bootstrap(server)) as producer:
        partitions = [(await producer.send("rr", b"x"))[0] for _ in range(6)]
    assert sorted(partitions) == [0, 0, 1, 1, 2, 2]
    assert len(set(partitions[:3])) == 3


async def test_send_batch_appends_one_batch_per_call(server: Server) -> None:
    async with Producer(_bootstrap(server)) as producer:
        first = await producer.send_batch("batches", 0, [Record(b"a%d" % i) for i in range(3)])
        second = await producer.send_batch("batches", 0, [Record(b"b%d" % i) for i in range(5)])
        third = await producer.send_batch("batches", 0, [Record(b"c")])
    assert (first, second, third) == (0, 3, 8)


async def test_concurrent_sends_share_batches_and_get_distinct_offsets(server: Server) -> None:
    async with Producer(_bootstrap(server), linger_ms=20) as producer:
        results = await asyncio.gather(
            *(producer.send("linger", b"%d" % i, partition=0) for i in range(50))
        )
    assert sorted(offset for _, offset in results) == list(range(50))


async def test_acks_zero_returns_no_offset_but_the_record_lands(server: Server) -> None:
    async with Producer(_bootstrap(server), acks=0) as producer:
        assert await producer.send("fire", b"x", partition=0) == (0, -1)
    async with Admin(_bootstrap(server)) as admin:
        for _ in range(50):
            if await admin.list_offsets("fire", 0, "latest") == 1:
                break
            await asyncio.sleep(0.02)
        assert await admin.list_offsets("fire", 0, "latest") == 1


async def test_unknown_partition_is_a_typed_error(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        await admin.create_topic("two", 2)
    async with Producer(_bootstrap(server)) as producer:
        with pytest.raises(KafkaError) as info:
            await producer.send("two", b"x", partition=7)
    assert info.value.error_code == ErrorCode.unknown_topic_or_partition


async def test_closed_producer_refuses_sends(server: Server) -> None:
    producer = Producer(_bootstrap(server))
    await producer.send("closing", b"x")
    await producer.close()
    with pytest.raises(RuntimeError):
        await producer.send("closing", b"y")


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_batches_land_whole_and_read_back(
    server: Server, compression: str
) -> None:
    """compression.type as Kafka's producer names it (a Spark write's kafka.compression.type):
    the batch is stored compressed, with a CRC the broker accepts, and reads back the same."""
    records = [Record(b"v%d" % i * 20, b"k%d" % i, (("h", b"%d" % i),)) for i in range(50)]
    async with Producer(_bootstrap(server), compression=compression) as producer:
        assert await producer.send_batch("packed", 0, records) == 0
    encoded = encode_batch(records, 0, CODECS[compression])
    assert parse_header(encoded).compression == CODECS[compression]
    got = decode_acquired("packed", 0, encoded, [AcquiredRange(0, 49, 1)])

    def fields(rs: Sequence[Record] | Sequence[ConsumerRecord]) -> list[Any]:
        return [(r.key, r.value, [tuple(h) for h in r.headers]) for r in rs]

    assert fields(got) == fields(records)
    async with Admin(_bootstrap(server)) as admin:
        assert await admin.list_offsets("packed", 0, "latest") == 50
    with pytest.raises(ValueError, match="compression must be one of"):
        Producer(_bootstrap(server), compression="brotli")
