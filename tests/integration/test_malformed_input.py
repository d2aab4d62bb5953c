"""Hostile and broken bytes on the wire: the broker answers or closes, and never stops serving.

One `shoal serve` process for the module. A witness connection is opened before any test and
must still answer after every one; after every test a fresh connection must get a correct
ApiVersions answer and a well-formed client must still produce and fetch.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import itertools
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.request import FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData
from kio.schema.produce.v9.request import ProduceRequest
from kio.schema.produce.v9.request import TopicProduceData
from kio.static.protocol import RequestPayload

from protocol.api_keys import API_VERSIONS
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import MAGIC_POS
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from tests.brokers import BrokerProcess
from tests.hypothesis_profiles import examples

pytestmark = pytest.mark.integration

TOPIC = "wire"
_correlation = itertools.count(1)

# --- a tiny blocking client ----------------------------------------------------------------


def connect(broker: BrokerProcess, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=timeout)


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """n bytes, or None when the peer closed the connection first."""
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes | None:
    """The next response payload; None when closed. socket.timeout when nothing comes."""
    size = recv_exact(sock, 4)
    if size is None:
        return None
    payload = recv_exact(sock, SIZE.unpack(size)[0])
    return payload


def encode(body: RequestPayload) -> tuple[int, bytes]:
    correlation = next(_correlation)
    return correlation, encode_request(body, correlation, "malformed-test")


def call(sock: socket.socket, body: RequestPayload) -> Any:
    correlation, payload = encode(body)
    sock.sendall(frame(payload))
    response = read_frame(sock)
    assert response is not None, f"connection closed instead of answering {type(body).__name__}"
    got, decoded = decode_response(body.__api_key__, body.__version__, response)
    assert got == correlation
    return decoded


def closed_within(sock: socket.socket, seconds: float = 5.0) -> bool:
    """True when the broker closes the connection (reads return EOF) within `seconds`."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return False


def api_versions(sock: socket.socket) -> Any:
    body = ApiVersionsRequest(client_software_name="malformed", client_software_version="1")
    return call(sock, body)


def produce_request(batch: bytes, acks: int = -1, topic: str = TOPIC) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=acks,  # type: ignore[arg-type]
        timeout=datetime.timedelta(seconds=5),  # type: ignore[arg-type]
        topic_data=(
            TopicProduceData(
                name=topic,  # type: ignore[arg-type]
                partition_data=(PartitionProduceData(index=0, records=batch),),  # type: ignore[arg-type]
            ),
        ),
    )


def fetch_request(offset: int) -> FetchRequest:
    return build(
        FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=(
            FetchTopic(
                topic=TOPIC,  # type: ignore[arg-type]
                partitions=(
                    build(
                        FetchPartition,
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        rack_id="",
    )


def metadata_request(topic: str = TOPIC) -> MetadataRequest:
    return MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),  # type: ignore[arg-type]
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def a_batch(n: int = 3, tag: bytes = b"") -> bytes:
    stamp = int(time.time() * 1000)
    return build_batch(
        [NewRecord(b"k%d" % i, b"value-%d-" % i + tag) for i in range(n)], timestamp_ms=stamp
    )


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _topic_made(module_broker_process: BrokerProcess) -> None:
    """The module's broker (module_broker_process) holds the topic the checks produce to."""
    with connect(module_broker_process) as sock:  # auto-created by Metadata
        deadline = time.monotonic() + 10
        while True:
            md = call(sock, metadata_request())
            if md.topics[0].error_code == ErrorCode.none and md.topics[0].partitions:
                break
            assert time.monotonic() < deadline, md
            time.sleep(0.1)


@pytest.fixture(scope="module")
def witness(module_broker_process: BrokerProcess) -> Iterator[socket.socket]:
    """A connection open for the whole module: other connections' garbage must not hurt it."""
    with connect(module_broker_process) as sock:
        assert api_versions(sock).error_code == ErrorCode.none
        yield sock


def assert_still_serving(broker: BrokerProcess, witness: socket.socket, *, full: bool) -> None:
    assert broker.proc is not None and broker.proc.poll() is None, broker.log()
    witness.settimeout(5)
    assert api_versions(witness).error_code == ErrorCode.none
    with connect(broker) as sock:
        resp = api_versions(sock)
        assert resp.error_code == ErrorCode.none
        assert {k.api_key for k in resp.api_keys} >= {0, 1, 3, 18}
        if not full:
            return
        batch = a_batch(tag=b"%d" % time.monotonic_ns())
        produced = call(sock, produce_request(batch))
        part = produced.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none, part
        fetched = call(sock, fetch_request(part.base_offset))
        data = fetched.responses[0].partitions[0]
        assert data.error_code == ErrorCode.none
        assert data.high_watermark == part.base_offset + 3
        records = bytes(data.records or b"")
        # The broker rewrites only the base offset and leader epoch: the rest comes back as sent.
        assert records[MAGIC_POS : len(batch)] == batch[MAGIC_POS:]
        assert struct.unpack_from(">q", records)[0] == part.base_offset


@pytest.fixture(autouse=True)
def _still_serving_after(
    module_broker_process: BrokerProcess, witness: socket.socket
) -> Iterator[None]:
    yield
    assert_still_serving(module_broker_process, witness, full=True)


# --- tests ---------------------------------------------------------------------------------


def test_well_formed_client_produces_and_fetches(
    module_broker_process: BrokerProcess, witness: socket.socket
) -> None:
    assert_still_serving(module_broker_process, witness, full=True)


@settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(min_size=1, max_size=2048))
def test_random_bytes(
    module_broker_process: BrokerProcess, witness: socket.socket, junk: bytes
) -> None:
    with connect(module_broker_process) as sock:
        sock.sendall(junk)
        closed_within(sock, 0.05)  # whatever happens to this connection, the broker survives
    assert_still_serving(module_broker_process, witness, full=False)


@pytest.mark.parametrize("size", [100 * 1024 * 1024 + 1, 2**31 - 1, -1, -(2**31)])
def test_oversized_or_negative_size_prefix_closes_the_connection(
    module_broker_process: BrokerProcess, size: int
) -> None:
    with connect(module_broker_process) as sock:
        sock.sendall(struct.pack(">i", size) + b"\x00" * 64)
        assert closed_within(sock), f"size prefix {size}: connection left open"


def _real_requests() -> list[bytes]:
    """Whole request payloads (no size prefix) of the kinds clients send most."""
    return [
        encode(metadata_request())[1],
        encode(produce_request(a_batch()))[1],
        encode(
            ApiVersionsRequest(client_software_name="x", client_software_version="1")  # type: ignore[arg-type]
        )[1],
    ]


REAL = _real_requests()


@settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(REAL).flatmap(lambda r: st.tuples(st.just(r), st.integers(0, len(r) - 1))))
def test_truncated_request_gets_an_error_or_a_close(
    module_broker_process: BrokerProcess, witness: socket.socket, case: tuple[bytes, int]
) -> None:
    """A frame whose body stops short: never a normal answer, never a dead broker."""
    payload, cut = case
    with connect(module_broker_process) as sock:
        sock.sendall(frame(payload[:cut]))
        sock.settimeout(5)
        try:
            response = read_frame(sock)
        except TimeoutError:
            pytest.fail(f"no answer and no close for a request truncated at {cut}")
        if response is not None:  # an answer is only acceptable when it carries an error
            key, version = struct.unpack_from(">hh", payload)
            _, body = decode_response(key, version, response)
            assert getattr(body, "error_code", None) not in (None, ErrorCode.none), body
    assert_still_serving(module_broker_process, witness, full=False)


@settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(REAL).flatmap(
        lambda r: st.tuples(
            st.just(r),
            st.lists(
                st.tuples(st.integers(0, len(r) - 1), st.integers(0, 255)),
                min_size=1,
                max_size=8,
            ),
        )
    )
)
def test_garbled_request_does_not_hurt_the_broker(
    module_broker_process: BrokerProcess,
    witness: socket.socket,
    case: tuple[bytes, list[tuple[int, int]]],
) -> None:
    """Bytes overwritten anywhere (header included): any answer, a close or silence is fine."""
    payload, edits = case
    garbled = bytearray(payload)
    for pos, value in edits:
        garbled[pos] = value
    with connect(module_broker_process) as sock:
        sock.sendall(frame(bytes(garbled)))
        sock.settimeout(1)
        with contextlib.suppress(TimeoutError):  # e.g. acks garbled to 0: no answer is due
            read_frame(sock)
    assert_still_serving(module_broker_process, witness, full=False)


@pytest.mark.parametrize("api_key", [999, 32767, -1, 200])
def test_unknown_api_key_closes_the_connection(
    module_broker_process: BrokerProcess, api_key: int
) -> None:
    with connect(module_broker_process) as sock:
        sock.sendall(frame(struct.pack(">hhi", api_key, 0, 7) + b"\x00\x03abc" + b"\x00" * 8))
        assert closed_within(sock), f"api key {api_key}: connection left open"


def test_api_versions_too_new_gets_v0_layout_with_unsupported_version(
    module_broker_process: BrokerProcess,
) -> None:
    with connect(module_broker_process) as sock:
        # A v99 header is unknown to us: KIP-511 says answer in the v0 layout anyway.
        sock.sendall(frame(struct.pack(">hhi", API_VERSIONS, 99, 4242) + b"\x00\x01x\x00"))
        response = read_frame(sock)
        assert response is not None, "closed instead of answering ApiVersions v99"
        correlation, error, count = struct.unpack_from(">ihi", response)
        assert correlation == 4242
        assert error == ErrorCode.unsupported_version.value == 35
        assert len(response) == 10 + 6 * count, "not the v0 layout"
        keys = {
            struct.unpack_from(">hhh", response, 10 + 6 * i)[0]: struct.unpack_from(
                ">hhh", response, 10 + 6 * i
            )[1:]
            for i in range(count)
        }
        assert API_VERSIONS in keys
        low, high = keys[API_VERSIONS]
        assert low <= 3 <= high
        # The connection stays usable: the client retries with a version we support.
        assert api_versions(sock).error_code == ErrorCode.none


def _old_request(key: int, version: int) -> bytes:
    """A request of a version below the broker's minimum: a v0-style header and some body."""
    return struct.pack(">hhi", key, version, 31337) + struct.pack(">h", 4) + b"test" + b"\x00" * 32


@pytest.mark.parametrize(
    ("key", "version"),
    [
        pytest.param(8, 1, id="OffsetCommit-v1"),
        pytest.param(32, 0, id="DescribeConfigs-v0"),
        pytest.param(1, 3, id="Fetch-v3"),
        pytest.param(2, 0, id="ListOffsets-v0"),
        pytest.param(19, 1, id="CreateTopics-v1"),
        pytest.param(0, 2, id="Produce-v2"),
    ],
)
def test_too_old_version_closes_the_connection(
    module_broker_process: BrokerProcess, key: int, version: int
) -> None:
    """As Kafka 4 (Processor.parseRequestHeader, processChannelException): no answer in any
    layout (tests/integration/test_old_clients.py has the versions old clients send)."""
    with connect(module_broker_process) as sock:
        supported = {k.api_key: (k.min_version, k.max_version) for k in api_versions(sock).api_keys}
        # Produce is listed from v0 (KAFKA-18659) and served from v3.
        assert version < (3 if key == 0 else supported[key][0]), "served: pick an older one"
        sock.sendall(frame(_old_request(key, version)))
        assert closed_within(sock), f"api key {key} v{version} was answered"


def test_produce_with_bad_crc_is_corrupt_message(
    module_broker_process: BrokerProcess, witness: socket.socket
) -> None:
    with connect(module_broker_process) as sock:
        before = call(sock, fetch_request(0)).responses[0].partitions[0].high_watermark
        batch = bytearray(a_batch(5))
        batch[-1] ^= 0xFF  # inside the last record: the CRC32C no longer matches
        resp = call(sock, produce_request(bytes(batch)))
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.corrupt_message, part
        after = call(sock, fetch_request(0)).responses[0].partitions[0].high_watermark
        assert after == before, "a corrupt batch was appended"
        # The same connection goes on: a good batch is accepted at the next offset.
        good = call(sock, produce_request(a_batch(2)))
        ok = good.responses[0].partition_responses[0]
        assert ok.error_code == ErrorCode.none
        assert ok.base_offset == before


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_naming_a_topic_by_id_gets_invalid_request(
    module_broker_process: BrokerProcess, version: int
) -> None:
    """Only v12 may name a topic by id (null name): Kafka answers v10 and v11 with
    INVALID_REQUEST for each topic, a null name as "" (KafkaApis.handleTopicMetadataRequest,
    MetadataRequest.getErrorResponse). The fuzzer found the v11 answer failing to encode."""
    m = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    with connect(module_broker_process) as sock:
        topic_id = call(sock, metadata_request()).topics[0].topic_id
        for wanted in (
            m.MetadataRequestTopic(topic_id=topic_id, name=None),
            m.MetadataRequestTopic(topic_id=topic_id, name=TOPIC),
        ):
            body = m.MetadataRequest(
                topics=(wanted,),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
                **({"include_cluster_authorized_operations": False} if version == 10 else {}),
            )
            answer = call(sock, body)
            assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
                (ErrorCode.invalid_request, wanted.name or "", topic_id)
            ]
            assert answer.brokers == ()
