"""A plain Fetch reader over `client.cluster`: a topic's records by offset, no group involved.

The client package has a producer, an admin and a share consumer but no plain consumer; the
batch reader needs only "records of partition p from offset a to b", which this gives over
`client.fetch.fetch_partition_data`; at read_committed, up to the last stable offset and without
the records of aborted transactions (`client.read_committed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from client.arrow_batches import batches_to_arrow
from client.cluster import Cluster
from client.fetch import fetch_partition
from client.fetch import fetch_partition_data
from client.read_committed import READ_UNCOMMITTED
from client.read_committed import committed_batches
from client.security import Security

_MAX_WAIT = datetime.timedelta(milliseconds=0)
# A task's first Fetch is the one nothing overlaps: asked smaller, it comes back in a few ms
# instead of 25-150 ms for 8 MiB, and the task starts decoding while the next one comes.
_FIRST_FETCH_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int


class Fetcher:
    """Fetch v4-12 (topics by name), one partition at a time, from its leader."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "shoal-fetcher",
        security: Security | None = None,
        isolation_level: int = READ_UNCOMMITTED,
    ) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security)
        self.isolation_level = isolation_level

    async def close(self) -> None:
        await self.cluster.close()

    async def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int
    ) -> tuple[bytes, int]:
        """Stored batches from `offset` on (at least one whole batch), and the high watermark.

        :raises KafkaError: the broker refused (OFFSET_OUT_OF_RANGE, unknown partition...).
        """
        return await fetch_partition(self.cluster, topic, partition, offset, max_bytes)

    async def read_raw(
        self, topic: str, partition: int, offset: int, end: int, max_bytes: int
    ) -> tuple[bytes, int]:
        """The stored batches of one Fetch from `offset`, undecoded, and the offset to fetch
        next (>= `end`: done). The batches may hold records outside [offset, end). At
        read_committed the batches of aborted transactions are left out, and the next offset
        is still past them (counted from the batches as fetched)."""
        got = await fetch_partition_data(
            self.cluster, topic, partition, offset, max_bytes, self.isolation_level
        )
        readable = got.last_stable_offset if self.isolation_level else got.high_watermark
        nxt = _next_offset(got.records)
        data = committed_batches(got.records, got.aborted)  # as is when none aborted
        if nxt is None or nxt <= offset:
            # No whole batch came back: the range runs past the log end or the LSO (or the
            # log shrank).
            return data, end if readable <= offset else offset + 1
        return data, nxt

    def arrow_rounds(
        self,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        partition: int,
        start: int,
        end: int,
        max_bytes: int,
        delivery_count: int | None = None,
        *,
        include_headers: bool = True,
    ) -> Iterator[Any]:
        """Arrow batches of the records of offsets [start, end), one per Fetch (see
        `arrow_ranges`)."""
        r = OffsetRange(topic, partition, start, end)
        return self.arrow_ranges(loop, [(r, delivery_count)], max_bytes,
                                 include_headers=include_headers)  # fmt: skip

    def arrow_ranges(
        self,
        loop: asyncio.AbstractEventLoop,
        ranges: Iterable[tuple[OffsetRange, int | None]],
        max_bytes: int,
        *,
        include_headers: bool = True,
    ) -> Iterator[Any]:
        """Arrow batches of the records of each range in turn (with its delivery count, or
        None), one per Fetch, each Fetch run on `loop` (a synchronous caller: a Spark task; see
        `task_loop`); without the headers column when `include_headers` is false
        (includeHeaders=false).

        One Fetch ahead: the next one (in this range or the next) is sent before this one's
        records are decoded and handed to Spark, so the broker reads and sends it meanwhile
        instead of waiting to be asked. At most two responses are held. The task's first Fetch
        asks at most `_FIRST_FETCH_BYTES`, to start decoding sooner.
        """
        todo = iter([(r, dc) for r, dc in ranges if r.start < r.end])

        def ask(r: OffsetRange, dc: int | None, offset: int, size: int = max_bytes) -> _Ask:
            answer = loop.create_task(self.read_raw(r.topic, r.partition, offset, r.end, size))
            loop.run_until_complete(asyncio.sleep(0))  # one step: it is sent, awaiting the answer
            return _Ask(r, dc, offset, answer)

        def first(
            item: tuple[OffsetRange, int | None] | None, size: int = max_bytes
        ) -> _Ask | None:
            return None if item is None else ask(item[0], item[1], item[0].start, size)

        ahead = first(next(todo, None), min(max_bytes, _FIRST_FETCH_BYTES))
        try:
            while ahead is not None:
                this = ahead
                data, nxt = loop.run_until_complete(this.answer)
                r = this.range
                ahead = ask(r, this.delivery_count, nxt) if nxt < r.end else first(next(todo, None))
                batch = batches_to_arrow(
                    data,
                    topic=r.topic,
                    partition=r.partition,
                    first=this.offset,
                    last=r.end - 1,
                    delivery_count=this.delivery_count,
                    include_headers=include_headers,
                )
                if batch.num_rows:
                    yield batch
        finally:
            if ahead is not None:  # closed early (a LIMIT) or failed: drop the Fetch ahead
                ahead.answer.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):  # unwanted anyway
                    loop.run_until_complete(ahead.answer)


@dataclass(frozen=True, slots=True)
class _Ask:
    """A Fetch sent and the range it reads: what `arrow_ranges` holds one ahead."""

    range: OffsetRange
    delivery_count: int | None
    offset: int
    answer: asyncio.Task[tuple[bytes, int]]


@contextlib.contextmanager
def task_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for a whole Spark task, stepped between the batches it yields.

    Not `asyncio.Runner`: in the main thread (a Python worker's) each `Runner.run` looks up its
    SIGINT handler, and `signal.getsignal` formats the handler's repr, which holds the finished
    task and so its result: a whole Fetch response, 10 ms per 8 MiB Fetch.
    """
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def _next_offset(data: bytes) -> int | None:
    """The offset after the last whole batch in `data`."""
    import struct

    pos, nxt = 0, None
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        nxt = base + last_delta + 1
        pos += 12 + length
    return nxt
