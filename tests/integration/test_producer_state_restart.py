"""After a restart an idempotent producer's retry is still a duplicate, on every partition.

The other half of "a producer id is never handed out twice" (issue 28): the state that knows a
retried batch (Kafka's ProducerStateManager, storage/src/main/java/org/apache/kafka/storage/
internals/log/ProducerStateManager.java, rebuilt from a snapshot plus the log after it) comes
back for every partition, from its snapshot after a clean stop and from batch headers after
kill -9. A batch retried across the restart is answered with its first offsets, not written
twice, and the next one follows on. Raw InitProducerId and Produce requests over a real
socket to `shoal serve`.
"""

from __future__ import annotations

import datetime
import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.produce.v10 import request as produce_request
from kio.schema.produce.v10.request import ProduceRequest
from kio.schema.produce.v10.response import ProduceResponse

from protocol.framing import frame
from protocol.messages import RequestPayload
from protocol.messages import ResponsePayload
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import build_batch
from tests.brokers import BrokerProcess
from tests.probe import read_frame

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS = "retries", 4


def call(sock: socket.socket, body: RequestPayload) -> ResponsePayload:
    sock.sendall(frame(encode_request(body, 1, "retrier")))
    _, response = decode_response(body.__api_key__, body.__version__, read_frame(sock))
    return response


def new_producer_id(sock: socket.socket) -> int:
    answer = call(
        sock,
        build(InitProducerIdRequest, transactional_id=None,
              transaction_timeout=datetime.timedelta(minutes=1), producer_id=-1, producer_epoch=-1),
    )  # fmt: skip
    assert isinstance(answer, InitProducerIdResponse) and answer.error_code == ErrorCode.none
    return int(answer.producer_id)


def produce(sock: socket.socket, partition: int, pid: int, seq: int) -> int:
    """A two-record batch at sequence `seq`; the base offset it was answered with."""
    records = build_batch(
        [(None, b"p%d-s%d" % (partition, seq)), (None, b"p%d-s%d" % (partition, seq + 1))],
        timestamp_ms=1, producer_id=pid, producer_epoch=0, base_sequence=seq,
    )  # fmt: skip
    data = build(produce_request.PartitionProduceData, index=partition, records=records)
    answer = call(
        sock,
        build(
            ProduceRequest, acks=-1, timeout=datetime.timedelta(seconds=5),
            topic_data=(build(produce_request.TopicProduceData, name=TOPIC,
                              partition_data=(data,)),),
        ),
    )  # fmt: skip
    assert isinstance(answer, ProduceResponse)
    [result] = answer.responses[0].partition_responses
    assert result.error_code == ErrorCode.none, result.error_code
    return int(result.base_offset)


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
def test_a_retry_after_a_restart_is_answered_with_its_first_offsets(
    tmp_path: Path, stop: str
) -> None:
    data = tmp_path / "data"
    with BrokerProcess(data) as broker, connect(broker) as sock:
        create_topic(broker.bootstrap)
        pid = new_producer_id(sock)
        for p in range(PARTITIONS):
            assert [produce(sock, p, pid, seq) for seq in (0, 2, 4)] == [0, 2, 4]
        if stop == "clean":
            assert broker.stop() == 0
        else:
            broker.kill()

    with BrokerProcess(data, port=broker.port) as broker, connect(broker) as sock:
        for p in range(PARTITIONS):
            assert produce(sock, p, pid, 4) == 4  # the last batch, retried
            assert produce(sock, p, pid, 0) == 0  # an older one still in the cache
            assert produce(sock, p, pid, 6) == 6  # the next follows: nothing written twice
        assert new_producer_id(sock) > pid
