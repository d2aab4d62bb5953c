"""The direct path of ShareFetch answers byte for byte what the general path answers.

Two brokers get the same requests over real sockets, one with the direct path
(`broker.handlers.share_fetch_direct`), one with it turned off; every answer, and the share
metrics at the end, must be equal (the topic ids, random per broker, swapped first). The
requests cover the direct path's shape and the edges around it: acknowledgements of every type
(ACCEPT, RELEASE, REJECT, gaps, offsets not held, RENEW on v1 and v2), refusals (a wrong epoch,
an unknown session), a partition or topic the session cannot hold, a session of two
partitions, record_limit (v2's ShareAcquireMode 1), a fetch that waits and is woken by a
produce, one whose wait runs out, and a seeded random walk of the same.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import struct
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.produce.v10 import request as produce_v10
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_fetch.v2 import request as fetch_v2
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.handlers import share_fetch_direct
from broker.server import Server
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from tests.brokers import make_server
from tests.clock import ManualClock

pytestmark = pytest.mark.integration
GROUP, MEMBER = "direct", "d" * 22
TOPIC, OTHER = "direct-topic", "direct-other"
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
_SIZE = struct.Struct(">i")


class Side:
    """One broker, a raw connection to it, and whether it takes the direct path."""

    def __init__(self, server: Server, direct: bool) -> None:
        self.server = server
        self.direct = direct
        self.ids: dict[str, uuid.UUID] = {}
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        for name, partitions in ((TOPIC, 2), (OTHER, 1)):
            self.ids[name] = self.server.services.logs.create_topic(name, partitions).topic_id

    async def send(self, data: bytes) -> None:
        share_fetch_direct.ENABLED = self.direct  # read as the request starts
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> bytes:
        size = _SIZE.unpack(await self.reader.readexactly(4))[0]
        return await self.reader.readexactly(size)

    def waiting(self, partition: int) -> bool:
        return self.server.services.notifier.waiting((TOPIC, partition))


class FrozenClock(ManualClock):
    """The same time on both brokers: the share-state control batches a fetch returns among
    the records carry it."""

    def now_ms(self) -> int:
        return 1_800_000_000_000 + self.offset_ms


@pytest.fixture
async def sides(tmp_path: Path) -> AsyncIterator[tuple[Side, Side]]:
    servers = [make_server(tmp_path / name, FrozenClock()) for name in ("direct", "general")]
    pair = (Side(servers[0], True), Side(servers[1], False))
    for side in pair:
        await side.server.start()
        await side.open()
    try:
        yield pair
    finally:
        share_fetch_direct.ENABLED = True
        for side in pair:
            side.writer.close()
            await side.server.stop()


class Script:
    """Requests written for each side (its own topic ids), sent to both, answers compared."""

    def __init__(self, sides: tuple[Side, Side]) -> None:
        self.sides = sides
        self.cid = 0
        self.answers = 0

    def _frame(self, side: Side, body: Any) -> bytes:
        return frame(encode_request(body, self.cid, "rdkafka"))

    async def both(self, make: Any) -> list[bytes]:
        """Send `make(side)`'s request to each side in turn, and compare the answers."""
        self.cid += 1
        got = []
        for side in self.sides:
            await side.send(self._frame(side, make(side)))
            got.append(await side.answer())
        self.compare(got)
        return got

    def compare(self, got: list[bytes]) -> None:
        direct, general = self.sides
        mine = got[0]
        for name, tid in direct.ids.items():
            mine = mine.replace(tid.bytes, general.ids[name].bytes)
        assert mine == got[1], f"answer {self.cid} differs"
        self.answers += 1

    async def woken(self, make: Any, partition: int) -> None:
        """A fetch that waits on each side until a produce to `partition` wakes it."""
        self.cid += 1
        got = []
        for side in self.sides:
            await side.send(self._frame(side, make(side)))
            deadline = time.monotonic() + 10
            while not side.waiting(partition):
                assert time.monotonic() < deadline, "the fetch never waited"
                await asyncio.sleep(0.005)
            produced = await _produce_on(side, partition, [b"woken"], self.cid)
            assert produced
            got.append(await side.answer())
        self.compare(got)


async def _produce_on(side: Side, partition: int, values: list[bytes], cid: int) -> bytes:
    """A Produce on its own connection (the answer awaited there)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", side.server.port)
    try:
        batch = build_batch([NewRecord(None, v) for v in values], timestamp_ms=1_700_000_000_000)
        m = produce_v10
        body = build(
            m.ProduceRequest, transactional_id=None, acks=-1,
            timeout=datetime.timedelta(seconds=30),
            topic_data=(build(m.TopicProduceData, name=TOPIC, partition_data=(
                build(m.PartitionProduceData, index=partition, records=batch),)),),
        )  # fmt: skip
        writer.write(frame(encode_request(body, cid, "rdkafka")))
        await writer.drain()
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        return await reader.readexactly(size)
    finally:
        writer.close()


async def produce(script: Script, partition: int, count: int) -> None:
    for side in script.sides:
        await _produce_on(side, partition, [b"v%d" % i for i in range(count)], 0)


Ack = tuple[int, int, tuple[int, ...]]


def fetch(
    epoch: int,
    *,
    acks: tuple[Ack, ...] = (),
    partition: int = 0,
    topic: str = TOPIC,
    version: int = 1,
    wait_ms: int = 0,
    max_records: int = 500,
    mode: int = 0,
    topic_id: uuid.UUID | None = None,
) -> Any:
    m = fetch_v2 if version == 2 else fetch_v1

    def make(side: Side) -> Any:
        batches = tuple(
            build(m.AcknowledgementBatch, first_offset=f, last_offset=last, acknowledge_types=t)
            for f, last, t in acks
        )
        part = build(m.FetchPartition, partition_index=partition, acknowledgement_batches=batches)
        tid = topic_id if topic_id is not None else side.ids[topic]
        return build(
            m.ShareFetchRequest, group_id=GROUP, member_id=MEMBER, share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1, max_bytes=1 << 20,
            max_records=max_records, batch_size=max_records, share_acquire_mode=mode,
            topics=(build(m.FetchTopic, topic_id=tid, partitions=(part,)),),
            forgotten_topics_data=(),
        )  # fmt: skip

    return make


def _heartbeat(side: Side) -> Any:
    return build(
        hb_v1.ShareGroupHeartbeatRequest, group_id=GROUP, member_id=MEMBER, member_epoch=0,
        subscribed_topic_names=(TOPIC, OTHER),
    )  # fmt: skip


def _metrics(side: Side) -> dict[str, Any]:
    m = side.server.services.metrics
    other = {str(tid): name for name, tid in side.ids.items()}
    return {
        name: dict(getattr(m, name).values)
        for name in (
            "share_fetch_requests", "share_fetch_failed", "share_ack_requests",
            "share_ack_failed", "topic_bytes_out",
        )
    } | {"ids": sorted(other.values())}  # fmt: skip


async def _start(script: Script) -> None:
    for side in script.sides:  # the heartbeat's answer carries a broker-made assignment
        await side.send(frame(encode_request(_heartbeat(side), 1, "rdkafka")))
        await side.answer()
    await script.both(fetch(0))  # opens the session (the general path on both)
    await produce(script, 0, 3)


async def test_direct_answers_as_the_general_path(sides: tuple[Side, Side]) -> None:
    script = Script(sides)
    await _start(script)
    # The shape: acknowledgements piggybacked, records there or not.
    await script.both(fetch(1))
    await produce(script, 0, 4)
    await script.both(fetch(2, acks=((0, 0, (ACCEPT,)), (1, 1, (RELEASE,)), (2, 2, (REJECT,)))))
    await script.both(fetch(3, acks=((1, 4, (ACCEPT, 0, RELEASE, ACCEPT)),)))  # a gap (0)
    await script.both(fetch(4, acks=((40, 41, (ACCEPT,)),)))  # offsets not held
    await script.both(fetch(5, acks=((1, 1, (RENEW,)),)))  # RENEW before v2: invalid request
    await script.both(fetch(6, acks=((4, 4, (RENEW,)),), version=2))
    await script.both(fetch(6))  # a wrong epoch: refused whole (the general path on both)
    await script.both(fetch(7, wait_ms=30))  # nothing to take: the wait runs out
    await produce(script, 0, 5)
    await script.both(fetch(8, max_records=2, mode=1, version=2))  # record_limit
    await script.both(fetch(9, acks=((5, 9, (ACCEPT,)),), max_records=1, version=2))
    # Partitions the session cannot hold, then a session of two partitions.
    await script.both(fetch(10, partition=7))
    await script.both(fetch(11, topic_id=uuid.UUID(int=12345)))
    await script.both(fetch(12, partition=1))
    await produce(script, 1, 2)
    await script.both(fetch(13, partition=1))
    await script.both(fetch(14, acks=((0, 1, (ACCEPT,)),), partition=1))
    await script.woken(fetch(15, wait_ms=5_000), 0)
    await script.both(fetch(99))  # unknown epoch far ahead
    assert _metrics(sides[0]) == _metrics(sides[1])
    assert script.answers == 18


async def test_a_random_walk_answers_alike(sides: tuple[Side, Side]) -> None:
    """A seeded walk of one-partition fetches with random acknowledgements of what was
    taken (and of offsets never taken), random versions and record limits."""
    rng = random.Random(33)
    script = Script(sides)
    await _start(script)
    epoch = 1
    held: list[int] = []
    for step in range(60):
        if rng.random() < 0.4:
            await produce(script, 0, rng.randint(1, 4))
        acks: list[Ack] = []
        for offset in sorted(rng.sample(held, k=min(len(held), rng.randint(0, 3)))):
            acks.append((offset, offset, (rng.choice((ACCEPT, RELEASE, REJECT, 0)),)))
        if rng.random() < 0.1:
            acks.append((10_000 + step, 10_000 + step, (ACCEPT,)))
        version = rng.choice((1, 2))
        got = await script.both(
            fetch(epoch, acks=tuple(acks), version=version, max_records=rng.choice((1, 3, 500)),
                  mode=rng.choice((0, 1)) if version == 2 else 0)
        )  # fmt: skip
        epoch += 1
        held = [o for o in held if o not in {a[0] for a in acks}] + _taken(got[1], version)
    assert _metrics(sides[0]) == _metrics(sides[1])


def _taken(answer: bytes, version: int) -> list[int]:
    _, body = decode_response(78, version, answer)
    return [
        o
        for t in body.responses
        for p in t.partitions
        for a in p.acquired_records
        for o in range(a.first_offset, a.last_offset + 1)
    ]
