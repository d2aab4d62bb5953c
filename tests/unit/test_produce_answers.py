"""Produce through a real connection, as one-record producers send it: every partition's
outcome answered in its own code, in request order, and counted in the request metrics.

The handler and the response encoder have a fast path for this shape (one topic, one
partition); these frames go through `KafkaConnection.data_received` with the broker's own
services, registry and storage, and only the socket is a fake.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.produce import v10
from kio.schema.types import TopicName
from kio.static.primitive import Records
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.connection import KafkaConnection
from broker.server import Server
from protocol.framing import FrameDecoder
from protocol.framing import frame
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import build_batch
from tests.brokers import make_server

TOPIC = "orders"
PRODUCE = int(v10.ProduceRequest.__api_key__)


class Socket(asyncio.Transport):
    """What the connection writes, and nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def produce(
    correlation_id: int, partition: int, records: bytes | None, acks: int = -1, topic: str = TOPIC
) -> bytes:
    body = v10.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            v10.request.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    v10.request.PartitionProduceData(
                        index=i32(partition),
                        records=None if records is None else Records(records),
                    ),
                ),
            ),
        ),
    )
    return frame(encode_request(body, correlation_id, "one-record"))


def one_record(value: bytes) -> bytes:
    return build_batch([(None, value)], timestamp_ms=1_700_000_000_000)


def answers(socket: Socket) -> list[tuple[int, ErrorCode, int]]:
    """Each answer's correlation id, its one partition's error code and base offset."""
    out = []
    for payload in FrameDecoder(1 << 20).feed(bytes(socket.written)):
        correlation_id, response = decode_response(PRODUCE, 10, payload)
        (topic,) = response.responses
        assert topic.name == TOPIC
        (partition,) = topic.partition_responses
        out.append((correlation_id, partition.error_code, int(partition.base_offset)))
    return out


def error_counts(server: Server) -> dict[str, float]:
    found = {}
    for family in server.services.metrics.request_stats.collect():
        if family.name == "kafka_network_requestmetrics_errors":
            for sample in family.samples:
                if sample.labels["request"] == "Produce":
                    found[sample.labels["error"]] = sample.value
    return found


def serve(server: Server, *frames: bytes) -> Socket:
    socket = Socket()
    connection = KafkaConnection(server.services, set())
    connection.connection_made(socket)
    connection.data_received(b"".join(frames))  # one read: answers share one write
    return socket


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = make_server(tmp_path / "data")
    srv.services.logs.create_topic(TOPIC, 2, {})
    yield srv
    srv.services.logs.close()


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Server]:
    authorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    srv = make_server(tmp_path / "data", **{"authorizer.class.name": authorizer})
    srv.services.logs.create_topic(TOPIC, 1, {})
    yield srv
    srv.services.logs.close()


async def test_each_outcome_is_answered_in_order_and_counted(server: Server) -> None:
    socket = serve(
        server,
        produce(1, 0, one_record(b"a")),
        produce(2, 7, one_record(b"b")),  # no such partition
        produce(3, 1, None),  # no records
        produce(4, 0, one_record(b"c")),
        produce(5, 1, one_record(b"d"), acks=0),  # appended, never answered
    )
    assert answers(socket) == [
        (1, ErrorCode.none, 0),
        (2, ErrorCode.unknown_topic_or_partition, -1),
        (3, ErrorCode.invalid_record, -1),
        (4, ErrorCode.none, 1),
    ]
    assert error_counts(server) == {"unknown_topic_or_partition": 1, "invalid_record": 1}
    assert server.services.metrics.request_stats.requests("Produce") == 5
    assert server.services.logs.log(TOPIC, 1).log_end_offset == 1  # type: ignore[union-attr]


async def test_a_denied_write_is_answered_and_counted(secured: Server) -> None:
    """With an authorizer and no ACL, the anonymous principal may not write: every request is
    still answered, in order, and nothing reaches the log."""
    socket = serve(secured, produce(1, 0, one_record(b"a")), produce(2, 0, one_record(b"b")))
    denied = ErrorCode.topic_authorization_failed
    assert answers(socket) == [(1, denied, -1), (2, denied, -1)]
    assert error_counts(secured) == {"topic_authorization_failed": 2}
    assert secured.services.logs.log(TOPIC, 0).log_end_offset == 0  # type: ignore[union-attr]


class FailingSyncs:
    """Group commit whose fsync of one log fails (a disk error): a fake, for that one case."""

    def __init__(self, failing: object) -> None:
        self.failing = failing

    async def durable(self, logs: list[object]) -> set[int]:
        await asyncio.sleep(0)  # the answer waits, as on the flush thread
        return {id(log) for log in logs if log is self.failing}


async def test_a_failed_fsync_is_answered_as_a_storage_error_and_counted(tmp_path: Path) -> None:
    srv = make_server(tmp_path / "data", **{"log.flush.interval.messages": 1})
    try:
        srv.services.logs.create_topic(TOPIC, 2, {})
        srv.services.group_commit = FailingSyncs(srv.services.logs.log(TOPIC, 1))  # type: ignore[assignment]
        socket = serve(srv, produce(1, 0, one_record(b"a")), produce(2, 1, one_record(b"b")))
        for _ in range(5):  # let the waiting requests finish
            await asyncio.sleep(0)
        assert answers(socket) == [(1, ErrorCode.none, 0), (2, ErrorCode.kafka_storage_error, -1)]
        assert error_counts(srv) == {"kafka_storage_error": 1}
    finally:
        srv.services.logs.close()


async def test_keyless_records_on_a_compacted_topic_are_named_in_the_answer(
    server: Server,
) -> None:
    """KIP-467 (Produce v8+): the batch fails whole with INVALID_RECORD, and `record_errors`
    names each keyless record by its index in the batch, as Kafka's ReplicaManager answers a
    `RecordValidationException` (no offset, the log start offset, a message), from
    LogValidator's `validateKey`."""
    server.services.logs.create_topic("keyed", 1, {"cleanup.policy": "compact"})
    keyed = build_batch([(b"k", b"0")], timestamp_ms=1_700_000_000_000)
    mixed = build_batch(
        [(b"k", b"1"), (None, b"2"), (b"k", b"3"), (None, b"4")], timestamp_ms=1_700_000_000_000
    )
    socket = serve(server, produce(1, 0, keyed, topic="keyed"), produce(2, 0, mixed, topic="keyed"))
    (_, first), (_, second) = (
        decode_response(PRODUCE, 10, payload)
        for payload in FrameDecoder(1 << 20).feed(bytes(socket.written))
    )
    assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
    (part,) = second.responses[0].partition_responses
    assert part.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in part.record_errors] == [1, 3]
    assert all(e.batch_index_error_message for e in part.record_errors)
    assert (part.base_offset, part.log_start_offset) == (-1, 0)
    assert part.error_message is not None and "2 of 4" in part.error_message
    assert server.services.logs.log("keyed", 0).log_end_offset == 1  # type: ignore[union-attr]
