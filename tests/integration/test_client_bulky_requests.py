"""The client's connection with requests of many entries (encoded in a thread) and large answers
(decoded in one) pipelined among small ones: each answer reaches its own request (what
`--processes N` relies on when it forwards a client's request of a million entries to node 0;
`test_stalls_processes` times the loop)."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_configs.v4 import request as describe_v4
from kio.schema.errors import ErrorCode

from broker.server import Server
from client import connection
from client.connection import Connection
from protocol.messages import BULKY_ENTRIES
from protocol.messages import build
from protocol.messages import is_bulky

pytestmark = pytest.mark.integration
BIG = 4 * BULKY_ENTRIES  # its answer is past DECODE_ON_LOOP_MAX_BYTES too


def _describe(count: int) -> describe_v4.DescribeConfigsRequest:
    resources = tuple(
        build(describe_v4.DescribeConfigsResource, resource_type=2, resource_name=f"none-{i}",
              configuration_keys=None)
        for i in range(count)
    )  # fmt: skip
    return build(describe_v4.DescribeConfigsRequest, resources=resources)


async def test_bulky_requests_and_large_answers_keep_their_places_among_small_ones(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    big, small = _describe(BIG), _describe(3)
    assert is_bulky(big) and not is_bulky(small)
    decoded_large: list[int] = []
    decode = connection.decode_response

    def counted(key: int, version: int, payload: bytes, *, large: bool = False) -> object:
        if large:
            decoded_large.append(len(payload))
        return decode(key, version, payload, large=large)

    monkeypatch.setattr(connection, "decode_response", counted)
    conn = await Connection.open("127.0.0.1", server.port)
    try:
        versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        answers = await asyncio.gather(
            conn.request(small), conn.request(big), conn.request(versions),
            conn.request(big), conn.request(small),
        )  # fmt: skip
    finally:
        await conn.close()
    names = [[r.resource_name for r in a.results] for a in (answers[0], answers[1], answers[4])]
    assert names == [["none-0", "none-1", "none-2"],
                     [f"none-{i}" for i in range(BIG)],
                     ["none-0", "none-1", "none-2"]]  # fmt: skip
    assert answers[3] == answers[1]
    assert answers[2].error_code == ErrorCode.none and answers[2].api_keys
    assert len(decoded_large) == 2  # both big answers (past DECODE_ON_LOOP_MAX_BYTES)
    assert min(decoded_large) > connection.DECODE_ON_LOOP_MAX_BYTES
