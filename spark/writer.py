"""`df.write.format("shoal")` and `df.writeStream.format("shoal")`: rows to a topic.

Columns, as in Spark's Kafka sink: `value` (binary or string, required), `key`, `headers`
(array<struct<key:string,value:binary>>), `partition` (int) and `topic` (overrides the `topic`
option); others are ignored. A null partition means Kafka's default partitioner (murmur2 of the
key, round robin without one). Each task produces its rows with `client.producer.Producer`
(acks=all by default) in batches of `batchRecords` per partition, a few in flight at a time;
the write fails if the broker refuses a batch. It does not write in transactions: a retried task or
batch writes its rows again (at-least-once), as Spark's Kafka sink does.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter
from pyspark.sql.datasource import DataSourceWriter
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import Row
from pyspark.sql.types import StructType

from client.producer import Producer
from client.producer import default_partition
from client.records import Record
from spark.options import WriteOptions

_IN_FLIGHT = 8


@dataclass
class Written(WriterCommitMessage):
    records: int


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    raise TypeError(f"cannot write {type(v).__name__} as bytes: cast the column to binary")


def _headers(v: Any) -> tuple[tuple[str, bytes | None], ...]:
    if not v:
        return ()
    return tuple((str(h[0]), _bytes(h[1])) for h in v)


class _Produce:
    """One task's rows, batched per (topic, partition) and produced a few batches at a time."""

    def __init__(self, opts: WriteOptions, columns: set[str]) -> None:
        self.opts = opts
        self.columns = columns
        self.round_robin: dict[str, itertools.count[int]] = {}
        self.buffers: dict[tuple[str, int], list[Record]] = {}
        self.in_flight: set[asyncio.Task[int]] = set()

    async def run(self, rows: Iterator[Row]) -> int:
        count = 0
        async with Producer(
            self.opts.bootstrap,
            acks=self.opts.acks,
            client_id=self.opts.client_id,
            security=self.opts.security,
            linger_ms=self.opts.linger_ms,
            timeout_ms=self.opts.request_timeout_ms,
            compression=self.opts.compression,
        ) as producer:
            for row in rows:
                topic = (row["topic"] if "topic" in self.columns else None) or self.opts.topic
                if topic is None:
                    raise ValueError("no topic: set the topic option or a topic column")
                key = _bytes(row["key"]) if "key" in self.columns else None
                partition = row["partition"] if "partition" in self.columns else None
                if partition is None:
                    partition = await self._partition(producer, topic, key)
                record = Record(
                    _bytes(row["value"]),
                    key,
                    _headers(row["headers"]) if "headers" in self.columns else (),
                )
                buffer = self.buffers.setdefault((topic, int(partition)), [])
                buffer.append(record)
                count += 1
                if len(buffer) >= self.opts.batch_records:
                    await self._send(producer, topic, int(partition))
            for topic, partition in list(self.buffers):
                await self._send(producer, topic, partition)
            for done in await asyncio.gather(*self.in_flight, return_exceptions=True):
                if isinstance(done, BaseException):
                    raise done
        return count

    async def _partition(self, producer: Producer, topic: str, key: bytes | None) -> int:
        info = await producer.cluster.topic(topic, auto_create=True)
        if key is not None:
            return default_partition(key, info.partition_count)
        counter = self.round_robin.setdefault(topic, itertools.count())
        return next(counter) % info.partition_count

    async def _send(self, producer: Producer, topic: str, partition: int) -> None:
        records = self.buffers.pop((topic, partition), [])
        if not records:
            return
        while len(self.in_flight) >= _IN_FLIGHT:
            done, self.in_flight = await asyncio.wait(
                self.in_flight, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                task.result()  # a refused batch fails the task now
        await producer.cluster.topic(topic, auto_create=True)
        self.in_flight.add(asyncio.create_task(producer.send_batch(topic, partition, records)))


def _check(schema: StructType) -> set[str]:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise ValueError("writing to shoal needs a value column (binary or string)")
    return names & {"key", "value", "headers", "partition", "topic"}


def write_rows(opts: WriteOptions, columns: set[str], rows: Iterator[Row]) -> Written:
    # One Spark task is one call: its own event loop for the whole of it.
    return Written(asyncio.run(_Produce(opts, columns).run(rows)))


class ShoalWriter(DataSourceWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = _check(schema)

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return write_rows(self.opts, self.columns, iterator)


class ShoalStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = _check(schema)

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return write_rows(self.opts, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task has produced its rows already; nothing is left to make visible."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Produced records cannot be taken back (not written in a transaction): the batch is
        retried."""
