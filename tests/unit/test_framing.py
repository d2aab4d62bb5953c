"""Framing and request decoding from plain bytes: no sockets."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic

from protocol.framing import FrameDecoder
from protocol.framing import FrameError
from protocol.framing import frame
from protocol.messages import UndecodableRequest
from protocol.messages import UnknownApi
from protocol.messages import decode_request
from protocol.messages import encode_request

payloads = st.lists(st.binary(max_size=300), max_size=20)


@given(payloads, st.lists(st.integers(min_value=1, max_value=50), min_size=1))
def test_frames_come_out_whole_however_the_stream_is_cut(
    items: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(frame(p) for p in items)
    decoder = FrameDecoder()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += decoder.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert out == items
    assert decoder.buffered == 0


@given(payloads)
def test_one_frame_per_read_comes_out_as_sent(items: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_bytes=300)
    assert [decoder.feed(frame(p)) for p in items] == [[p] for p in items]
    assert decoder.buffered == 0


def test_a_whole_frame_above_the_limit_in_one_read_is_refused() -> None:
    with pytest.raises(FrameError):
        FrameDecoder(max_frame_bytes=10).feed(frame(b"x" * 11))


@given(st.integers(min_value=1001, max_value=2**31 - 1))
def test_frame_above_the_limit_is_refused_before_its_body_arrives(size: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(FrameError):
        decoder.feed(size.to_bytes(4, "big"))


def test_negative_size_is_refused() -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(b"\xff\xff\xff\xfe")


def test_request_round_trip() -> None:
    body = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="t"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    req = decode_request(encode_request(body, 42, "cid"))
    assert req.body == body
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id) == (3, 12, 42)
    assert req.header.client_id == "cid"


def test_unknown_api_key_and_version() -> None:
    raw = bytearray(
        encode_request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), 1, None
        )
    )
    raw[0:2] = (999).to_bytes(2, "big")
    with pytest.raises(UnknownApi):
        decode_request(bytes(raw))
    raw[0:2] = (18).to_bytes(2, "big")
    raw[2:4] = (99).to_bytes(2, "big")
    with pytest.raises(UnknownApi):
        decode_request(bytes(raw))


@given(st.data())
def test_truncated_or_garbled_requests_raise_only_undecodable(data: st.DataObject) -> None:
    body = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    raw = bytearray(encode_request(body, 7, "client"))
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    garble = data.draw(
        st.lists(st.tuples(st.integers(4, len(raw) - 1), st.integers(0, 255)), max_size=4)
    )
    for pos, value in garble:
        raw[pos] = value
    candidate = bytes(raw[:cut]) if data.draw(st.booleans()) else bytes(raw)
    with contextlib.suppress(UndecodableRequest, UnknownApi):
        decode_request(candidate)
