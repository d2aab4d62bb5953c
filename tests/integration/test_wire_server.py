"""The wire server: responses in request order, and back-pressure on a flooding client."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12 import request as fetch_v12

from broker.server import Server
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.record_batch import build_batch

pytestmark = pytest.mark.integration


async def test_a_slow_request_holds_back_the_responses_after_it(server: Server) -> None:
    """A long-poll Fetch, then ApiVersions pipelined behind it: the answers come in order."""
    server.services.logs.create_topic("quiet", 1, {})
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    fetch = build(
        fetch_v12.FetchRequest,
        max_wait=datetime.timedelta(milliseconds=400),
        min_bytes=1,
        max_bytes=1 << 20,
        topics=(
            build(
                fetch_v12.FetchTopic,
                topic="quiet",
                partitions=(
                    build(
                        fetch_v12.FetchPartition,
                        partition=0,
                        fetch_offset=0,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    started = time.monotonic()
    writer.write(frame(encode_request(fetch, 1, "t")))
    writer.write(
        frame(
            encode_request(
                ApiVersionsRequest(client_software_name="t", client_software_version="1"), 2, "t"
            )
        )
    )
    await writer.drain()
    order = []
    for key, version in ((1, 12), (18, 3)):
        size = SIZE.unpack(await reader.readexactly(4))[0]
        correlation, _ = decode_response(key, version, await reader.readexactly(size))
        order.append((correlation, time.monotonic() - started))
    writer.close()
    assert [c for c, _ in order] == [1, 2]
    assert order[1][1] >= 0.35  # ApiVersions was ready at once but waited for the Fetch


async def test_a_client_that_never_reads_cannot_pile_up_responses(server: Server) -> None:
    """Fetches of 1 MiB pipelined by a client that reads nothing: once the socket's write
    buffer is full the broker stops reading requests, so responses cannot pile up in memory."""
    plog = server.services.logs.create_topic("big", 1, {}) and server.services.logs.log("big", 0)
    assert plog is not None
    for _ in range(12):
        plog.append(build_batch([(None, b"x" * 1000)] * 100, timestamp_ms=1), now_ms=1)
    fetch = build(
        fetch_v12.FetchRequest,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        topics=(
            build(
                fetch_v12.FetchTopic,
                topic="big",
                partitions=(
                    build(
                        fetch_v12.FetchPartition,
                        partition=0,
                        fetch_offset=0,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    requests = frame(encode_request(fetch, 1, "flood")) * 50_000  # ~4 MB of requests
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setblocking(False)
    sent, loop = 0, asyncio.get_running_loop()
    deadline = loop.time() + 3
    while loop.time() < deadline and sent < len(requests):
        with contextlib.suppress(BlockingIOError):
            sent += sock.send(requests[sent : sent + 65536])
        await asyncio.sleep(0.01)  # the broker runs in this loop
    answered = server.services.metrics.request_stats.requests("Fetch")
    sock.close()
    # Each answer is ~1 MiB: without back-pressure all 50,000 (50 GiB) would be made.
    assert answered < 200, answered
    assert sent < len(requests)  # and the client's further requests were left unread
