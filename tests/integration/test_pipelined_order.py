"""Promise 1, standing: requests on one connection take effect in the order they were sent.

Pipelined Produce requests of mixed sizes on one connection, as librdkafka sends them: frames
above the connection's decode-on-loop size (256 KiB) are decoded in a thread, and a small
Produce sent after a big one was once appended first (librdkafka's ordering test saw message
3758 at offset 0). Kafka handles one request per connection at a time, so the order sent is the
order stored. Run against a broker process on each event loop.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import PartitionProduceData
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.produce.v9.request import TopicProduceData

from broker.connection import DECODE_ON_LOOP_MAX_BYTES
from client import Admin
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import build_batch
from tests.brokers import BrokerProcess
from tests.probe import read_frame

pytestmark = pytest.mark.integration

TOPIC = "pipelined"
REQUESTS = 24
BIG = DECODE_ON_LOOP_MAX_BYTES + 44 * 1024  # decoded in a thread
SMALL = 1024  # decoded on the loop


def _produce(index: int) -> bytes:
    """Produce request `index` (correlation id too): one record whose value starts with it."""
    size = BIG if index % 2 == 0 else SMALL
    value = b"%06d:" % index + bytes(size)
    batch = build_batch([(None, value)], timestamp_ms=1_700_000_000_000)
    body = build(
        ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            build(
                TopicProduceData,
                name=TOPIC,
                partition_data=(build(PartitionProduceData, index=0, records=batch),),
            ),
        ),
    )
    return frame(encode_request(body, index, "pipelined-order"))


async def _create_topic(bootstrap: str) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(TOPIC, 1)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_pipelined_produces_of_mixed_sizes_are_stored_in_the_order_sent(
    tmp_path: Path, loop: str
) -> None:
    with BrokerProcess(tmp_path / "data", env={"SHOAL_LOOP": loop}) as broker:
        asyncio.run(_create_topic(broker.bootstrap))
        frames = [_produce(i) for i in range(REQUESTS)]
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            sock.sendall(b"".join(frames))  # all in flight at once
            answers = [
                decode_response(ProduceRequest.__api_key__, 9, read_frame(sock))
                for _ in range(REQUESTS)
            ]
        assert [cid for cid, _ in answers] == list(range(REQUESTS))  # answered in request order
        stored = []
        for _, response in answers:
            [partition] = response.responses[0].partition_responses
            assert partition.error_code == ErrorCode.none
            stored.append(partition.base_offset)
        assert stored == list(range(REQUESTS)), "request i must be stored at offset i"

        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "order", "fetch.max.bytes": 1 << 24}
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            seen: list[int] = []
            while len(seen) < REQUESTS:
                batch = consumer.consume(REQUESTS, timeout=10)
                assert batch, f"read back only {len(seen)} of {REQUESTS}"
                for m in batch:
                    assert m.error() is None, m.error()
                    seen.append(int(m.value()[:6]))
        finally:
            consumer.close()
        assert seen == list(range(REQUESTS))
