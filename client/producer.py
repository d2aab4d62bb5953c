"""An asyncio producer: Produce v9-12, acks -1/0/1, batching of the sends made within a linger.

Partitioning follows Kafka's default partitioner for keyed records (murmur2 of the key bytes,
sign bit cleared, modulo the partition count), so a key lands on the partition the Java client
and librdkafka's `murmur2_random` pick; keyless records go round robin.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from types import TracebackType
from typing import Any

from kio.schema.errors import ErrorCode

from client.cluster import API_PRODUCE
from client.cluster import Cluster
from client.errors import ClientStateError
from client.errors import KafkaError
from client.errors import error_for
from client.kio_apis import PRODUCE
from client.records import Record
from client.records import encode_batch
from client.security import Security
from protocol.messages import build

_M32 = 0xFFFFFFFF
# Kafka's compression.type names and their codec ids in a batch's attributes.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (32-bit, seed 0x9747b28c), as a signed int like Java's."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & _M32
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & _M32
        k ^= k >> r
        k = (k * m) & _M32
        h = ((h * m) & _M32) ^ k
    tail = data[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & _M32
    h ^= h >> 13
    h = (h * m) & _M32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, partitions: int) -> int:
    """Kafka's `toPositive(murmur2(key)) % numPartitions`."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass
class _Pending:
    """Records waiting for one partition's next batch, and the sends waiting on them."""

    records: list[Record] = field(default_factory=list)
    futures: list[asyncio.Future[int]] = field(default_factory=list)


class Producer:
    """`send` returns (partition, offset) once the broker has the record (acks permitting)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        acks: int = -1,
        linger_ms: int = 0,
        max_batch_records: int = 10_000,
        timeout_ms: int = 30_000,
        client_id: str = "shoal-producer",
        security: Security | None = None,
        compression: str = "none",
    ) -> None:
        if acks not in (-1, 0, 1):
            raise ValueError("acks must be -1, 0 or 1")
        if compression not in CODECS:
            raise ValueError(f"compression must be one of {', '.join(CODECS)}")
        self._codec = CODECS[compression]
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security)
        self._acks = acks
        self._linger_s = linger_ms / 1000
        self._max_batch = max_batch_records
        self._timeout_ms = timeout_ms
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._flushes: set[asyncio.Task[None]] = set()
        self._closed = False

    async def __aenter__(self) -> Producer:
        await self.cluster.bootstrap()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> tuple[int, int]:
        """Produce one record; sends made before the linger ends share a batch.

        Returns (partition, offset); the offset is -1 with acks=0.
        :raises KafkaError: the broker refused the batch.
        """
        self._check_open()
        await self.cluster.bootstrap()
        info = await self.cluster.topic(topic, auto_create=True)
        if partition is None:
            if key is not None:
                partition = default_partition(key, info.partition_count)
            else:
                counter = self._round_robin.setdefault(topic, itertools.count())
                partition = next(counter) % info.partition_count
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        pending = self._pending.get((topic, partition))
        if pending is None or len(pending.records) >= self._max_batch:
            pending = self._pending[(topic, partition)] = _Pending()
            task = asyncio.create_task(self._linger_then_send(topic, partition, pending))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
        pending.records.append(Record(value, key, tuple(headers), timestamp_ms))
        pending.futures.append(fut)
        return partition, await fut

    async def _linger_then_send(self, topic: str, partition: int, pending: _Pending) -> None:
        await asyncio.sleep(self._linger_s)
        if self._pending.get((topic, partition)) is pending:
            del self._pending[(topic, partition)]
        try:
            base = await self.send_batch(topic, partition, pending.records)
        except Exception as e:  # every waiting send gets the failure
            for fut in pending.futures:
                if not fut.done():
                    fut.set_exception(e)
            return
        for i, fut in enumerate(pending.futures):
            if not fut.done():
                fut.set_result(base + i if base >= 0 else -1)

    async def send_batch(self, topic: str, partition: int, records: list[Record]) -> int:
        """Produce `records` as one RecordBatch; returns its base offset (-1 with acks=0).

        :raises KafkaError: the broker refused the batch.
        """
        self._check_open()
        await self.cluster.bootstrap()
        info = await self.cluster.topic(topic, auto_create=True)
        if partition not in info.partitions:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"{topic} has no partition {partition}"
            )
        version = self.cluster.version(API_PRODUCE, 9, 12)
        m = PRODUCE.requests(version)
        req = build(
            m.ProduceRequest,
            transactional_id=None,
            acks=self._acks,
            timeout=datetime.timedelta(milliseconds=self._timeout_ms),
            topic_data=(
                build(
                    m.TopicProduceData,
                    name=topic,
                    partition_data=(
                        build(
                            m.PartitionProduceData,
                            index=partition,
                            records=encode_batch(records, int(time.time() * 1000), self._codec),
                        ),
                    ),
                ),
            ),
        )
        leader = info.partitions[partition].leader_id
        if self._acks == 0:
            await self.cluster.request(req, node_id=leader, expect_response=False)
            return -1
        resp = await self.cluster.call(req, PRODUCE.response(version), node_id=leader)
        p = resp.responses[0].partition_responses[0]
        if p.error_code != ErrorCode.none:
            if p.error_code in (
                ErrorCode.not_leader_or_follower,
                ErrorCode.unknown_topic_or_partition,
            ):
                self.cluster.forget(topic)
            raise error_for(p.error_code, p.error_message or _record_errors(p))
        return int(p.base_offset)

    async def flush(self) -> None:
        """Wait until every send made so far has been answered."""
        while self._flushes:
            await asyncio.gather(*list(self._flushes), return_exceptions=True)

    async def close(self) -> None:
        if self._closed:
            return
        await self.flush()
        self._closed = True
        await self.cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClientStateError("producer is closed")


def _record_errors(p: Any) -> str | None:
    errors = getattr(p, "record_errors", ())
    return (
        "; ".join(f"record {e.batch_index}: {e.batch_index_error_message}" for e in errors) or None
    )
