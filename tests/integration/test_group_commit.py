"""With `log.flush.interval.messages=1` every produce is fsynced before it is answered; the
produces a producer pipelines into one read share one batch of fsyncs (group commit), run off
the event loop, instead of one fsync each on the loop."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce.v10 import request as produce_request
from kio.schema.produce.v10.request import ProduceRequest
from kio.schema.produce.v10.response import ProduceResponse

from broker.server import Server
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import build_batch

REQUESTS = 50


@pytest.fixture
def broker_overrides() -> dict[str, object]:
    return {"log.flush.interval.messages": 1}


def produce(topic: str, partition: int, value: bytes) -> ProduceRequest:
    records = build_batch([(None, value)], timestamp_ms=1)
    return build(
        ProduceRequest,
        acks=-1,
        timeout=__import__("datetime").timedelta(seconds=5),
        topic_data=(
            build(
                produce_request.TopicProduceData,
                name=topic,
                partition_data=(
                    build(produce_request.PartitionProduceData, index=partition, records=records),
                ),
            ),
        ),
    )


async def test_pipelined_produces_share_fsyncs_and_all_are_answered(broker: Server) -> None:
    broker.services.logs.create_topic("durable", 2, {})
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    # One write, so the broker reads them together: as a pipelining producer sends them.
    writer.write(
        b"".join(
            frame(encode_request(produce("durable", i % 2, b"v%d" % i), i, "t"))
            for i in range(REQUESTS)
        )
    )
    await writer.drain()
    answers = []
    for _ in range(REQUESTS):
        (size,) = SIZE.unpack(await reader.readexactly(SIZE.size))
        correlation_id, body = decode_response(0, 10, await reader.readexactly(size))
        assert isinstance(body, ProduceResponse)
        answers.append((correlation_id, body.responses[0].partition_responses[0].error_code))
    writer.close()
    assert answers == [(i, ErrorCode.none) for i in range(REQUESTS)]
    # Every answer waited for a sync, and the syncs were shared: far fewer batches than requests.
    assert 1 <= broker.services.group_commit.batches < REQUESTS // 5
    for p in (0, 1):
        plog = broker.services.logs.log("durable", p)
        assert plog is not None and not plog.sync_due
        assert plog.log_end_offset == REQUESTS // 2
