"""KafkaConnection byte by byte: raw frames in through data_received, a recording transport out.

The handlers here wait on an asyncio.Event per correlation id, so each test decides when (and in
which order) requests finish. Everything else is the broker's own: its services, its framing, its
kio codecs. Only the transport is a fake, as in uvicorn's protocol tests.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import struct
from collections import defaultdict
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import BrokerId
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta
from kio.static.protocol import RequestPayload
from kio.static.protocol import ResponsePayload
from structlog.testing import capture_logs

from broker import gc_pause
from broker.connection import COUNT_ON_LOOP_MAX_CODES
from broker.connection import DECODE_ON_LOOP_MAX_BYTES
from broker.connection import MAX_IN_FLIGHT
from broker.connection import KafkaConnection
from broker.context import BrokerServices
from broker.context import RequestContext
from broker.logs import REQUEST
from broker.registry import HandleFn
from broker.registry import Handler
from broker.registry import Registry
from broker.registry import handler
from broker.request_order import release_order
from protocol.framing import FrameDecoder
from protocol.framing import frame
from protocol.messages import EncodedResponse
from protocol.messages import decode_response
from protocol.messages import encode_request
from tests.brokers import make_server

API_VERSIONS = int(ApiVersionsRequest.__api_key__)
SERVED_VERSION = int(ApiVersionsRequest.__version__)  # the only version the test handler serves
# The fixed start of a request header: api key, api version, correlation id, client id (null).
HEADER = struct.Struct(">hhih")


def served_by(
    request: type[RequestPayload], response: type[ResponsePayload], handle: HandleFn
) -> Handler:
    """The one place this file declares a Handler: `handle` answers `request` with `response`."""
    return handler(handle, request, responses=(response,), acl=())


def broker_services(data_dir: Path, registry: Registry, **config: object) -> BrokerServices:
    """The broker's real services (built as the server builds them) around a test registry."""
    services = make_server(data_dir, **config).services
    services.registry = registry
    return services


class RecordingTransport(asyncio.Transport):
    """Records what the connection does to its socket; closing reports back as a real one does."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str | bytes] = []  # bytes for writes, names for everything else
        self.protocol: asyncio.Protocol | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.events.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0  # every write goes straight out

    def pause_reading(self) -> None:
        self.events.append("pause_reading")

    def resume_reading(self) -> None:
        self.events.append("resume_reading")

    def close(self) -> None:
        self._lost("close")

    def abort(self) -> None:
        self._lost("abort")

    def _lost(self, how: str) -> None:
        self.events.append(how)
        if self.protocol is not None:  # asyncio calls connection_lost on the next loop turn
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def timeline(self) -> list[str]:
        """Events in order, each written frame shown as `answer <correlation id>`."""
        decoder = FrameDecoder()
        out: list[str] = []
        for event in self.events:
            if isinstance(event, str):
                out.append(event)
            else:
                out += [f"answer {_correlation_id(f)}" for f in decoder.feed(event)]
        assert decoder.buffered == 0, "a response frame was written in pieces"
        return out

    def frames(self) -> list[bytes]:
        decoder = FrameDecoder()
        return [f for e in self.events if isinstance(e, bytes) for f in decoder.feed(e)]


def _correlation_id(response: bytes) -> int:
    # Every response header version starts with the correlation id.
    return int.from_bytes(response[:4], "big", signed=True)


class Wire:
    """One KafkaConnection on a recording transport, with handlers the test finishes by hand."""

    def __init__(self, data_dir: Path, **config: object) -> None:
        self.gates: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.started: list[int] = []  # correlation ids, in the order handlers were entered
        self.fields: list[object] = []  # REQUEST (the log fields) as each handler saw it
        self.fail: set[int] = set()  # correlation ids whose handler raises once its gate opens
        # Correlation ids whose handler waits while still taking effect; the others wait as a
        # long poll does, having let the connection's later requests start (release_order).
        self.holding: set[int] = set()
        registry = Registry([served_by(ApiVersionsRequest, ApiVersionsResponse, self._handle)])
        self.connection = KafkaConnection(broker_services(data_dir, registry, **config), set())
        self.transport = RecordingTransport()
        self.transport.protocol = self.connection
        self.connection.connection_made(self.transport)

    async def _handle(
        self, ctx: RequestContext, request: ApiVersionsRequest
    ) -> ApiVersionsResponse:
        cid = ctx.header.correlation_id
        self.started.append(cid)
        self.fields.append(REQUEST.get())
        if cid not in self.holding:
            release_order()
        await self.gates[cid].wait()
        self.fields.append(REQUEST.get())
        if cid in self.fail:
            raise RuntimeError("handler bug")
        return ApiVersionsResponse(
            error_code=ErrorCode.none,
            api_keys=(),
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        )

    def send(self, data: bytes) -> None:
        self.connection.data_received(data)

    def finish(self, *correlation_ids: int) -> None:
        for cid in correlation_ids:
            self.gates[cid].set()

    @property
    def timeline(self) -> list[str]:
        return self.transport.timeline()

    @property
    def answers(self) -> list[int]:
        """Correlation ids of the answers written, in the order they were written."""
        return [_correlation_id(f) for f in self.transport.frames()]

    @property
    def reading_paused(self) -> bool:
        # The connection may pause and resume within one read while it dispatches the frames
        # of that read (today it does), so what counts is the last call.
        calls = [e for e in self.timeline if e.endswith("_reading")]
        return bool(calls) and calls[-1] == "pause_reading"


def request(correlation_id: int) -> bytes:
    """A whole ApiVersions v3 request frame, as a client writes it."""
    body = ApiVersionsRequest(client_software_name="test", client_software_version="1")
    return frame(encode_request(body, correlation_id, "test"))


async def settle() -> None:
    """Let every task that can run do so (a finished handler needs a few loop turns to answer)."""
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
def wire(tmp_path: Path) -> Wire:
    return Wire(tmp_path / "data")


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for pos in range(0, len(data), size):
        yield data[pos : pos + size]


# ordering ------------------------------------------------------------------------------------


async def test_answers_keep_request_order_when_the_second_finishes_first(wire: Wire) -> None:
    wire.send(request(1) + request(2))  # pipelined: both frames in one read
    await settle()
    assert wire.started == [1, 2]  # both dispatched at once, neither waits for the other

    wire.finish(2)
    await settle()
    assert wire.answers == []  # the second answer is held back behind the first

    wire.finish(1)
    await settle()
    assert wire.answers == [1, 2]


async def test_a_refused_version_keeps_its_place_in_line(wire: Wire) -> None:
    # Unsupported versions are answered without a handler, but still after earlier requests.
    unsupported = frame(HEADER.pack(API_VERSIONS, SERVED_VERSION + 1, 2, -1))
    wire.send(request(1) + unsupported)
    await settle()
    assert wire.answers == []

    wire.finish(1)
    await settle()
    assert wire.answers == [1, 2]
    assert wire.started == [1]
    # ApiVersions refuses in its v0 layout (KIP-511) so that any client can read it.
    correlation_id, body = decode_response(API_VERSIONS, 0, wire.transport.frames()[1])
    assert isinstance(body, ApiVersionsResponseV0)
    assert (correlation_id, body.error_code) == (2, ErrorCode.unsupported_version)


async def test_answers_ready_within_one_read_go_out_in_one_write(wire: Wire) -> None:
    # Handlers that never wait answer during the read: one write (one system call) for all.
    wire.finish(1, 2, 3)
    wire.send(request(1) + request(2) + request(3))
    writes = [e for e in wire.transport.events if isinstance(e, bytes)]
    assert len(writes) == 1
    assert wire.answers == [1, 2, 3]


async def test_a_handler_that_never_waits_answers_without_a_task(wire: Wire) -> None:
    wire.finish(1)
    wire.send(request(1))
    assert wire.answers == [1]  # before any loop turn: no task was needed

    wire.send(request(2))  # this one waits on its gate: it goes on in a task
    assert wire.started == [1, 2]
    wire.finish(2)
    await settle()
    assert wire.answers == [1, 2]


async def test_log_fields_hold_for_the_whole_request_and_stay_inside_it(wire: Wire) -> None:
    wire.finish(1)
    wire.send(request(1) + request(2))  # the first never waits, the second goes on in a task
    assert REQUEST.get() is None  # the fields did not leak into the reader's context
    wire.finish(2)
    await settle()
    assert wire.answers == [1, 2]
    one, two = (
        ("test", str(cid), "ApiVersions", "User:ANONYMOUS", "127.0.0.1:50000") for cid in (1, 2)
    )
    assert [tuple(map(str, f)) if f else f for f in wire.fields] == [one, one, two, two]


@pytest.mark.parametrize("waits", [False, True])
async def test_a_failing_handler_answers_unknown_server_error(wire: Wire, waits: bool) -> None:
    wire.fail.add(1)
    if not waits:
        wire.finish(1)
    with capture_logs() as logs:
        wire.send(request(1))
        wire.finish(1)
        await settle()
    (answer,) = wire.transport.frames()
    _, body = decode_response(API_VERSIONS, SERVED_VERSION, answer)
    assert body.error_code == ErrorCode.unknown_server_error
    assert [e["event"] for e in logs] == ["handler failed"]
    assert wire.connection.idle


def one_handler(data_dir: Path, handle: HandleFn) -> tuple[KafkaConnection, RecordingTransport]:
    """A connection whose registry serves ApiVersions v3 with `handle` alone."""
    registry = Registry([served_by(ApiVersionsRequest, ApiVersionsResponse, handle)])
    connection = KafkaConnection(broker_services(data_dir, registry), set())
    transport = RecordingTransport()
    transport.protocol = connection
    connection.connection_made(transport)
    return connection, transport


@pytest.mark.parametrize("before_its_task_runs", [False, True])
async def test_a_waiting_handler_is_cancelled_where_it_waits_when_the_connection_is_lost(
    tmp_path: Path, before_its_task_runs: bool
) -> None:
    # The handler's first step runs outside any task; the task that goes on from its await
    # must still deliver the cancellation there, so the handler's own clean-up runs.
    cancelled: list[object] = []

    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            cancelled.append(REQUEST.get())
            raise
        raise AssertionError("the event is never set")

    connection, transport = one_handler(tmp_path / "data", handle)
    connection.data_received(request(7))
    if not before_its_task_runs:
        await settle()
    connection.connection_lost(None)
    await settle()
    assert [(f[1], f[2]) for f in cancelled if f] == [(7, "ApiVersions")]  # with its log fields
    assert transport.frames() == []


@pytest.mark.parametrize("waits", [False, True])
async def test_an_answer_of_another_api_is_answered_unknown_server_error(
    tmp_path: Path, waits: bool
) -> None:
    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> Any:
        if waits:
            await asyncio.sleep(0.001)
        # Bytes of another API's answer, of the request's version: they would frame as they are.
        return EncodedResponse(0, SERVED_VERSION, b"")

    connection, transport = one_handler(tmp_path / "data", handle)
    with capture_logs() as logs:
        connection.data_received(request(1))
        for _ in range(100):
            if transport.frames():
                break
            await asyncio.sleep(0.005)
    (answer,) = transport.frames()
    _, body = decode_response(API_VERSIONS, SERVED_VERSION, answer)
    assert body.error_code == ErrorCode.unknown_server_error
    assert [e["event"] for e in logs] == ["handler failed"]
    assert connection.idle


async def test_a_bare_yield_resumes_the_handler_on_its_task_s_first_step(tmp_path: Path) -> None:
    # `await asyncio.sleep(0)` yields None: the loop has run once the task starts, so the
    # task resumes the handler at once rather than yielding a second time.
    passes = 0

    def count_passes() -> None:
        nonlocal passes
        passes += 1
        asyncio.get_running_loop().call_soon(count_passes)

    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
        await asyncio.sleep(0)
        return ApiVersionsResponse(
            error_code=ErrorCode.none,
            api_keys=(),
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        )

    connection, transport = one_handler(tmp_path / "data", handle)
    asyncio.get_running_loop().call_soon(count_passes)
    connection.data_received(request(1))
    for _ in range(10):
        if transport.frames():
            break
        await asyncio.sleep(0)
    assert transport.frames()
    assert passes == 1


# framing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 3, 7, 40])
async def test_frames_split_across_reads_are_served_whole_and_in_order(
    wire: Wire, cut: int
) -> None:
    wire.finish(1, 2, 3)
    stream = request(1) + request(2) + request(3)
    for piece in chunks(stream, cut):
        wire.send(piece)
        await settle()
    assert wire.started == [1, 2, 3]
    assert wire.answers == [1, 2, 3]
    assert not wire.reading_paused


async def test_one_read_with_several_frames_and_a_partial_tail(wire: Wire) -> None:
    wire.finish(1, 2, 3, 4)
    fourth = request(4)
    wire.send(request(1) + request(2) + request(3) + fourth[:5])
    await settle()
    assert wire.started == [1, 2, 3]  # the partial fourth frame is kept, not dispatched
    assert wire.answers == [1, 2, 3]
    assert not wire.reading_paused  # the rest of it has to be read

    wire.send(fourth[5:])
    await settle()
    assert wire.started == [1, 2, 3, 4]
    assert wire.answers == [1, 2, 3, 4]


async def test_a_request_still_taking_effect_holds_back_the_next(wire: Wire) -> None:
    """Requests take effect in the order sent: a handler that waits before it has released
    the connection (a write, slices of work) keeps the next request from starting."""
    wire.holding.add(1)
    wire.send(request(1) + request(2))
    await settle()
    assert wire.started == [1]
    assert wire.reading_paused  # request 2 waits, read but not dispatched
    wire.finish(1, 2)
    await settle()
    assert wire.started == [1, 2]
    assert wire.answers == [1, 2]
    assert not wire.reading_paused


async def test_a_request_decoded_in_a_thread_keeps_its_place(wire: Wire) -> None:
    """A frame above DECODE_ON_LOOP_MAX_BYTES is decoded off the loop; the small request after
    it starts only once the big one's handler has run (pipelined Produce requests of mixed
    sizes were appended out of order when it did not)."""
    wire.finish(1, 2, 3)
    big = oversize_request(2, DECODE_ON_LOOP_MAX_BYTES + 1024)[4:]
    wire.send(request(1) + frame(big) + request(3))
    for _ in range(500):
        await asyncio.sleep(0.01)
        if len(wire.answers) == 3:
            break
    assert wire.started == [1, 2, 3]
    assert wire.answers == [1, 2, 3]


# backpressure ----------------------------------------------------------------------------------


async def test_reading_pauses_at_the_in_flight_limit_and_resumes_as_answers_go_out(
    wire: Wire,
) -> None:
    last = MAX_IN_FLIGHT + 1
    wire.send(b"".join(request(cid) for cid in range(1, last + 1)))
    await settle()
    assert wire.started == list(range(1, MAX_IN_FLIGHT + 1))  # the last one waits its turn
    assert wire.reading_paused

    wire.finish(1)  # room for the waiting frame: dispatched, and the limit is reached again
    await settle()
    assert wire.started[-1] == last
    assert wire.answers == [1]
    assert wire.reading_paused

    wire.finish(2)  # now below the limit with nothing waiting: read again, after the answer
    await settle()
    assert wire.answers == [1, 2]
    assert not wire.reading_paused
    assert wire.timeline[-2:] == ["answer 2", "resume_reading"]

    wire.finish(*range(3, last + 1))
    await settle()
    assert wire.answers == list(range(1, last + 1))
    assert not wire.reading_paused


async def test_reading_is_not_paused_below_the_in_flight_limit(wire: Wire) -> None:
    wire.send(b"".join(request(cid) for cid in range(1, MAX_IN_FLIGHT)))
    await settle()
    assert len(wire.started) == MAX_IN_FLIGHT - 1
    assert not wire.reading_paused


# refused input ---------------------------------------------------------------------------------


def oversize_request(correlation_id: int, size: int) -> bytes:
    """A well-formed request padded to `size` bytes (kio ignores bytes after the fields)."""
    payload = encode_request(
        ApiVersionsRequest(client_software_name="test", client_software_version="1"),
        correlation_id,
        "test",
    )
    return frame(payload + bytes(size - len(payload)))


async def test_a_frame_at_the_limit_is_served(tmp_path: Path) -> None:
    # The counterpart of the next test: the same padded request, one byte smaller, is fine.
    wire = Wire(tmp_path / "data", **{"socket.request.max.bytes": 1024})
    wire.finish(1)
    wire.send(oversize_request(1, 1024))
    await settle()
    assert wire.answers == [1]


async def test_an_oversize_frame_closes_the_connection_without_dispatching(
    tmp_path: Path,
) -> None:
    wire = Wire(tmp_path / "data", **{"socket.request.max.bytes": 1024})
    wire.finish(1, 2)
    too_big = oversize_request(1, 1025)
    with capture_logs() as logs:
        wire.send(too_big[:4])  # refused on its size alone, before the body arrives
        wire.send(too_big[4:] + request(2))  # nothing after it is read either
        await settle()
    assert wire.started == []
    assert wire.transport.events == ["abort"]
    assert closing_reasons(logs) == ["bad frame: frame size 1025 outside 0..1024"]


async def test_a_frame_shorter_than_a_header_closes_the_connection(wire: Wire) -> None:
    wire.finish(1, 3)
    with capture_logs() as logs:
        wire.send(request(1) + frame(b"\x00\x12\x00") + request(3))
        await settle()
    assert wire.started == [1]
    # Request 1 was in flight when the connection closed: its answer is never written.
    assert wire.answers == []
    assert wire.timeline[-1:] == ["abort"]
    assert closing_reasons(logs) == ["frame of 3 bytes is shorter than a header"]


async def test_an_undecodable_body_closes_the_connection(wire: Wire) -> None:
    wire.finish(1, 2, 3)
    with capture_logs() as logs:
        wire.send(request(1) + frame(undecodable(2, length=3)) + request(3))
        await settle()
    # Found while reading: nothing after it is dispatched, and request 1 is never answered.
    assert wire.started == [1]
    assert wire.answers == []
    assert wire.timeline[-1:] == ["abort"]
    assert closing_reasons(logs) == ["undecodable request: ApiVersionsRequest"]


async def test_a_large_undecodable_body_closes_the_connection_from_its_thread(
    wire: Wire,
) -> None:
    # A frame above DECODE_ON_LOOP_MAX_BYTES is decoded in a worker thread; request 3 waits
    # for it (requests take effect in the order sent), and is never dispatched.
    wire.finish(1, 2, 3)
    with capture_logs() as logs:
        wire.send(request(1) + frame(undecodable(2, DECODE_ON_LOOP_MAX_BYTES)) + request(3))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if "abort" in wire.timeline:
                break
        await settle()
    assert wire.started == [1]
    assert wire.answers == [1]
    assert wire.timeline[-2:] == ["answer 1", "abort"]
    assert closing_reasons(logs) == ["undecodable request: ApiVersionsRequest"]


def undecodable(correlation_id: int, length: int) -> bytes:
    """An ApiVersions request of the served version whose software name is not UTF-8."""
    header = HEADER.pack(API_VERSIONS, SERVED_VERSION, correlation_id, -1) + b"\x00"  # no tags
    return header + _uvarint(length + 1) + b"\xff" * length + b"\x011\x00"


def closing_reasons(logs: list[Any]) -> list[str]:
    """Why the connection closed, one entry per log line, without the decoder's own detail."""
    return [
        ":".join(str(e["reason"]).split(":")[:2])
        for e in logs
        if e["event"] == "closing connection"
    ]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# large requests and slices (issue 27: no request holds the loop) ------------------------------


async def test_a_handler_working_in_slices_holds_back_the_requests_after_it(
    tmp_path: Path,
) -> None:
    # Between slices of its work other connections are served, but the requests sent after it
    # on its own connection must take effect after it, as if it had run at once (promise 1).
    started: list[int] = []
    slices = 5

    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
        cid = ctx.header.correlation_id
        started.append(cid)
        if cid == 1:
            for _ in range(slices):
                await asyncio.sleep(0)  # what broker.slicing.Slicer does when a slice is spent
                started.append(-1)
        return ApiVersionsResponse(
            error_code=ErrorCode.none,
            api_keys=(),
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        )

    connection, transport = one_handler(tmp_path / "data", handle)
    connection.data_received(request(1) + request(2) + request(3))
    await settle()
    assert started == [1, *[-1] * slices, 2, 3]
    assert [_correlation_id(f) for f in transport.frames()] == [1, 2, 3]
    assert connection.idle


def metadata_wire(
    data_dir: Path, gate: asyncio.Event
) -> tuple[KafkaConnection, RecordingTransport]:
    """A connection whose registry serves Metadata v12, answering once `gate` is set."""

    async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
        await gate.wait()
        return MetadataResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            brokers=(),
            cluster_id=None,
            controller_id=BrokerId(0),
            topics=(),
        )

    registry = Registry([served_by(MetadataRequest, MetadataResponse, handle)])
    connection = KafkaConnection(broker_services(data_dir, registry), set())
    transport = RecordingTransport()
    transport.protocol = connection
    connection.connection_made(transport)
    return connection, transport


def naming(topics: int) -> bytes:
    """A Metadata request naming `topics` topics of 100 characters: above
    DECODE_ON_LOOP_MAX_BYTES from 2,600 of them."""
    body = MetadataRequest(
        topics=tuple(
            MetadataRequestTopic(topic_id=None, name=TopicName(f"{i:0100d}")) for i in range(topics)
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return frame(encode_request(body, 1, "test"))


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never")


async def test_a_large_request_pauses_garbage_collection_until_answered(tmp_path: Path) -> None:
    # Decoded in a thread, answered from one; collection resumes once it is answered.
    gate = asyncio.Event()
    connection, transport = metadata_wire(tmp_path / "data", gate)
    assert gc.isenabled()
    connection.data_received(naming(3000))
    await until(lambda: not gc.isenabled())
    await asyncio.sleep(0.05)
    assert not gc.isenabled() and gc_pause.held()
    gate.set()
    await until(lambda: bool(transport.frames()))
    await settle()
    assert gc.isenabled() and not gc_pause.held()


async def test_a_large_request_of_few_entries_does_not_pause_collection(tmp_path: Path) -> None:
    # A few big record batches (or here, nine long names): paused while decoded only.
    gate = asyncio.Event()
    connection, transport = metadata_wire(tmp_path / "data", gate)
    long_name = 32_000  # a string's length is an int16
    body = MetadataRequest(
        topics=tuple(
            MetadataRequestTopic(topic_id=None, name=TopicName(f"{i}" * long_name))
            for i in range(DECODE_ON_LOOP_MAX_BYTES // long_name + 1)
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    connection.data_received(frame(encode_request(body, 1, "test")))
    await until(lambda: not gc_pause.held())
    assert gc.isenabled()
    gate.set()
    await until(lambda: bool(transport.frames()))


async def test_a_large_request_never_answered_resumes_collection_when_the_connection_goes(
    tmp_path: Path,
) -> None:
    connection, _ = metadata_wire(tmp_path / "data", asyncio.Event())
    connection.data_received(naming(3000))
    await until(lambda: not gc.isenabled())
    connection.connection_lost(None)
    await settle()
    assert gc.isenabled() and not gc_pause.held()


async def test_the_pause_lasts_max_pause_s_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large request still in flight (a long wait, say) gives collection back all the same.
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_S", 0.2)
    gate = asyncio.Event()
    connection, transport = metadata_wire(tmp_path / "data", gate)
    connection.data_received(naming(3000))
    await until(lambda: not gc.isenabled())
    await until(lambda: gc.isenabled())
    assert not gc_pause.held() and not connection.idle  # not answered yet
    gate.set()
    await until(lambda: bool(transport.frames()))
    assert gc.isenabled()


async def test_the_pause_ends_once_the_process_has_spent_max_pause_cpu_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound is work done (CPU time, where garbage comes from), not time on the clock: a
    # request on a loaded machine keeps the pause while it waits for a core, and gives it back
    # once the process has worked MAX_PAUSE_CPU_S since the pause began (a CPU clock of ours).
    cpu = [0.0]
    monkeypatch.setattr(gc_pause, "cpu_clock", lambda: cpu[0])
    monkeypatch.setattr(gc_pause, "CHECK_EVERY_S", 0.01)
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_CPU_S", 5.0)
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_S", 60)  # longer than `until` waits
    gate = asyncio.Event()
    connection, transport = metadata_wire(tmp_path / "data", gate)
    connection.data_received(naming(3000))
    await until(lambda: not gc.isenabled())
    cpu[0] = 4.9
    await asyncio.sleep(0.3)  # on the clock, past the 0.2 s pause of the test above
    assert not gc.isenabled() and gc_pause.held()
    cpu[0] = 5.0
    await until(lambda: gc.isenabled())
    assert not gc_pause.held() and not connection.idle  # not answered yet
    gate.set()
    await until(lambda: bool(transport.frames()))
    assert gc.isenabled()


async def test_one_large_request_holds_the_pause_and_the_next_cannot_extend_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Large requests back to back, on two connections: collection resumes when the holder is
    # answered, though the other is still in flight (it never held the pause).
    monkeypatch.setattr(gc_pause, "MAX_PAUSE_S", 60)  # longer than `until` waits
    gates = [asyncio.Event(), asyncio.Event()]
    first, first_out = metadata_wire(tmp_path / "a", gates[0])
    second, second_out = metadata_wire(tmp_path / "b", gates[1])
    first.data_received(naming(3000))
    await until(lambda: not gc.isenabled())
    second.data_received(naming(3000))
    await asyncio.sleep(0.1)
    gates[0].set()
    await until(lambda: bool(first_out.frames()))
    await until(lambda: gc.isenabled())
    assert not gc_pause.held() and not second.idle
    gates[1].set()
    await until(lambda: bool(second_out.frames()))
    await settle()
    assert gc.isenabled() and not gc_pause.held()


async def test_every_error_code_of_a_long_encoded_answer_is_counted(tmp_path: Path) -> None:
    # A Produce of 100,000 unknown partitions: its codes are counted in a thread (~100 ms of
    # counting on the loop), all of them.
    many = COUNT_ON_LOOP_MAX_CODES * 3

    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> EncodedResponse:
        codes = (int(ErrorCode.unknown_topic_or_partition),) * many
        return EncodedResponse(API_VERSIONS, ctx.header.api_version, b"", 0, codes)

    connection, transport = one_handler(tmp_path / "data", handle)
    connection.data_received(request(1))
    stats = connection._services.metrics.request_stats
    key = ("ApiVersions", int(ErrorCode.unknown_topic_or_partition))
    await until(lambda: stats._errors.get(key) == many)
    assert [_correlation_id(f) for f in transport.frames()] == [1]
