"""The hot path's ProduceResponse serialiser writes exactly the bytes kio's writer does.

Hypothesis makes the results (topics, partitions, error codes, offsets, messages, record
errors); the same results go through kio (its dataclasses and writer of that very version) and
through `protocol.produce_response`, for every version the Produce handler serves.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64

from protocol.framing import frame
from protocol.messages import EncodedResponse
from protocol.messages import encode_response
from protocol.messages import response_frame
from protocol.produce_response import MAX_VERSION
from protocol.produce_response import MIN_VERSION
from protocol.produce_response import PartitionResult
from protocol.produce_response import RecordError
from protocol.produce_response import TopicResults
from protocol.produce_response import encode_produce_response

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
codes = st.sampled_from([int(c) for c in ErrorCode])
int64 = st.integers(-(2**63), 2**63 - 1)
text = st.text(max_size=300)  # past 127 bytes the compact length takes two varint bytes

record_errors = st.builds(
    RecordError, batch_index=st.integers(-(2**31), 2**31 - 1), message=st.none() | text
)
partitions = st.lists(
    st.builds(
        PartitionResult,
        partition=st.integers(-(2**31), 2**31 - 1),
        error_code=codes,
        base_offset=int64,
        log_start_offset=int64,
        error_message=st.none() | text,
        record_errors=st.lists(record_errors, max_size=3).map(tuple),
    ),
    max_size=5,
)
topics = st.lists(st.tuples(text, partitions), max_size=4)


def kio_response(version: int, results: list[TopicResults], throttle_ms: int) -> Any:
    """The response as kio's own dataclasses of `version` hold it (fields it lacks left out)."""
    schema = importlib.import_module(f"kio.schema.produce.v{version}.response")
    names = {f.name for f in dataclasses.fields(schema.PartitionProduceResponse)}

    def partition(p: PartitionResult) -> Any:
        values = {
            "index": i32(p.partition),
            "error_code": ErrorCode(p.error_code),
            "base_offset": i64(p.base_offset),
            "log_start_offset": i64(p.log_start_offset),
            "error_message": p.error_message,
        }
        if "record_errors" in names:  # v8+; older versions answer with the error code alone
            values["record_errors"] = tuple(
                schema.BatchIndexAndErrorMessage(
                    batch_index=i32(e.batch_index), batch_index_error_message=e.message
                )
                for e in p.record_errors
            )
        return schema.PartitionProduceResponse(**{k: v for k, v in values.items() if k in names})

    return schema.ProduceResponse(
        responses=tuple(
            schema.TopicProduceResponse(
                name=TopicName(name), partition_responses=tuple(partition(p) for p in parts)
            )
            for name, parts in results
        ),
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms)),
    )


@pytest.mark.parametrize("version", VERSIONS)
@given(
    results=topics, throttle_ms=st.integers(0, 2**31 - 1), correlation_id=st.integers(0, 2**31 - 1)
)
def test_bytes_match_kio(
    version: int, results: list[TopicResults], throttle_ms: int, correlation_id: int
) -> None:
    ours = EncodedResponse(0, version, encode_produce_response(version, results, throttle_ms))
    expected = encode_response(kio_response(version, results, throttle_ms), correlation_id, version)
    assert encode_response(ours, correlation_id, version) == expected
    assert response_frame(ours, correlation_id, version) == frame(expected)  # as sent


def test_an_unserved_version_is_refused() -> None:
    with pytest.raises(ValueError, match="v13"):
        encode_produce_response(13, [])
    with pytest.raises(ValueError, match="v2"):
        encode_produce_response(2, [])


def test_an_encoded_response_answers_only_its_own_version() -> None:
    with pytest.raises(ValueError, match="answers v9"):
        encode_response(EncodedResponse(0, 10, encode_produce_response(10, [])), 1, 9)


one_partition = st.builds(
    PartitionResult,
    partition=st.integers(-(2**31), 2**31 - 1),
    error_code=codes,
    base_offset=int64,
    log_start_offset=int64,
    record_errors=st.just(()) | st.just((RecordError(37, "no key"),)),
)


@pytest.mark.parametrize("version", VERSIONS)
@given(name=text, partition=one_partition, throttle_ms=st.integers(0, 2**31 - 1))
def test_one_topic_one_partition_matches_kio(
    version: int, name: str, partition: PartitionResult, throttle_ms: int
) -> None:
    """The shape of every one-record producer's answer, which v9+ writes in one pack."""
    results: list[TopicResults] = [(name, [partition])]
    ours = encode_produce_response(version, results, throttle_ms)
    expected = encode_response(kio_response(version, results, throttle_ms), 7, version)
    assert encode_response(EncodedResponse(0, version, ours), 7, version) == expected
