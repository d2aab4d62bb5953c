"""The hot path's ShareFetchResponse serialiser writes exactly the bytes kio's writer does.

Hypothesis makes the answers (topics, partitions, error codes, acknowledgement errors, record
bytes, acquired ranges, top-level error and lock timeout); the same answers go through kio's
own dataclasses and writer of each version and through `protocol.share_fetch_response`.
"""

from __future__ import annotations

import datetime
import importlib
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId
from kio.static.primitive import Records
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64

from protocol.framing import frame
from protocol.messages import EncodedResponse
from protocol.messages import encode_response
from protocol.messages import response_frame
from protocol.share_fetch_response import VERSIONS
from protocol.share_fetch_response import AcquiredRange
from protocol.share_fetch_response import PartitionAnswer
from protocol.share_fetch_response import TopicAnswers
from protocol.share_fetch_response import encode_share_fetch_response
from protocol.wire import uvarint

SHARE_FETCH = 78
codes = st.sampled_from([int(c) for c in ErrorCode])
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
messages = st.none() | st.text(max_size=200)  # past 127 bytes a compact length takes 2 bytes

ranges = st.lists(
    st.builds(AcquiredRange, int64, int64, st.integers(-(2**15), 2**15 - 1)), max_size=4
)
partitions = st.lists(
    st.builds(
        PartitionAnswer,
        partition=int32,
        error_code=codes,
        acknowledge_error_code=codes,
        acknowledge_error_message=messages,
        leader_id=int32,
        leader_epoch=int32,
        # Past 127 bytes the records' compact length takes 2 bytes, past 16,382 three.
        records=st.binary(max_size=300) | st.integers(16_000, 17_000).map(lambda n: b"r" * n),
        acquired=ranges,
    ),
    max_size=4,
)
topics = st.lists(st.tuples(st.uuids(), partitions), max_size=3)


def kio_response(
    version: int,
    answers: list[TopicAnswers],
    lock_ms: int,
    code: int,
    message: str | None,
    throttle_ms: int,
) -> Any:
    """The answer as kio's own dataclasses of `version` hold it."""
    schema = importlib.import_module(f"kio.schema.share_fetch.v{version}.response")

    def partition(p: PartitionAnswer) -> Any:
        return schema.PartitionData(
            partition_index=i32(p.partition),
            error_code=ErrorCode(p.error_code),
            error_message=None,
            acknowledge_error_code=i16(p.acknowledge_error_code),
            acknowledge_error_message=p.acknowledge_error_message,
            current_leader=schema.LeaderIdAndEpoch(
                leader_id=BrokerId(p.leader_id), leader_epoch=i32(p.leader_epoch)
            ),
            records=Records(p.records),
            acquired_records=tuple(
                schema.AcquiredRecords(
                    first_offset=i64(a.first_offset),
                    last_offset=i64(a.last_offset),
                    delivery_count=i16(a.delivery_count),
                )
                for a in p.acquired
            ),
        )

    return schema.ShareFetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms)),
        error_code=ErrorCode(code),
        error_message=message,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=lock_ms)),
        responses=tuple(
            schema.ShareFetchableTopicResponse(
                topic_id=topic_id, partitions=tuple(partition(p) for p in parts)
            )
            for topic_id, parts in answers
        ),
        node_endpoints=(),
    )


@pytest.mark.parametrize("version", VERSIONS)
@given(
    answers=topics,
    lock_ms=st.integers(0, 2**31 - 1),
    code=codes,
    message=messages,
    throttle_ms=st.integers(0, 2**31 - 1),
    correlation_id=int32,
)
def test_bytes_match_kio(
    version: int,
    answers: list[TopicAnswers],
    lock_ms: int,
    code: int,
    message: str | None,
    throttle_ms: int,
    correlation_id: int,
) -> None:
    body = encode_share_fetch_response(
        version,
        answers,
        lock_timeout_ms=lock_ms,
        error_code=code,
        error_message=message,
        throttle_time_ms=throttle_ms,
    )
    ours = EncodedResponse(SHARE_FETCH, version, body)
    expected = encode_response(
        kio_response(version, answers, lock_ms, code, message, throttle_ms), correlation_id, version
    )
    assert encode_response(ours, correlation_id, version) == expected
    assert response_frame(ours, correlation_id, version) == frame(expected)  # as sent


@given(value=st.integers(0, 2**35) | st.integers(0, 0x4100))
def test_uvarint_is_the_varint_loop(value: int) -> None:
    """`uvarint`'s one- and two-byte shortcuts write what the plain 7-bits-at-a-time loop
    (Kafka's ByteUtils.writeUnsignedVarint) writes."""
    expected = bytearray()
    rest = value
    while rest > 0x7F:
        expected.append((rest & 0x7F) | 0x80)
        rest >>= 7
    expected.append(rest)
    assert uvarint(value) == bytes(expected)


def test_an_unserved_version_is_refused() -> None:
    with pytest.raises(ValueError, match="v0"):
        encode_share_fetch_response(0, [], lock_timeout_ms=0)


def test_topic_ids_are_written_as_their_16_bytes() -> None:
    topic = uuid.UUID(int=1)
    body = encode_share_fetch_response(1, [(topic, [])], lock_timeout_ms=0)
    assert topic.bytes in body
