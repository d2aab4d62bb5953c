"""protocol.messages: the lenient-by-version but strict-by-name builder, and responses encoded
with the writer of the request's version."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v13.response import FetchableTopicResponse as FetchTopicV13
from kio.schema.find_coordinator.v0.response import FindCoordinatorResponse as FindV0
from kio.schema.find_coordinator.v2.response import FindCoordinatorResponse as FindV2
from kio.schema.metadata.v1.response import MetadataResponse as MetadataV1
from kio.schema.metadata.v10 import response as metadata_v10
from kio.schema.share_fetch.v1.response import ShareFetchResponse as ShareFetchV1
from kio.schema.share_fetch.v2.response import ShareFetchResponse as ShareFetchV2
from kio.schema.types import BrokerId
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from protocol.api_keys import METADATA
from protocol.api_keys import SHARE_FETCH
from protocol.messages import build
from protocol.messages import decode_response
from protocol.messages import encode_response
from protocol.messages import error_response

NONE = i32Timedelta.parse(datetime.timedelta(0))


def test_a_misspelt_name_raises_instead_of_being_dropped() -> None:
    with pytest.raises(TypeError, match="eror_code"):
        build(FindV2, eror_code=ErrorCode.coordinator_not_available)


NONE = i32Timedelta.parse(datetime.timedelta(0))


def test_a_misspelt_name_raises_on_a_nested_entity_too() -> None:
    with pytest.raises(TypeError, match="partitons"):
        build(FetchTopicV13, topic_id=uuid.uuid4(), partitons=())


def test_a_name_of_another_version_is_accepted_and_dropped() -> None:
    # error_message exists in FindCoordinator v1+, not in v0.
    got = build(FindV0, error_code=ErrorCode.none, error_message="unused", host="h")
    assert got.host == "h"
    assert not hasattr(got, "error_message")
    # A nested entity: Fetch's topic name exists up to v12 only.
    topic = build(FetchTopicV13, topic="t", topic_id=uuid.UUID(int=1))
    assert topic.topic_id == uuid.UUID(int=1)
    assert topic.partitions == ()


def test_required_fields_not_given_get_their_zero_value() -> None:
    got = build(FindV2, error_code=ErrorCode.not_coordinator)
    assert (got.error_code, got.node_id, got.host, got.port) == (
        ErrorCode.not_coordinator,
        0,
        "",
        0,
    )


def test_error_response_of_an_api_without_a_top_level_error_is_empty() -> None:
    response = error_response(METADATA, 1, ErrorCode.unknown_server_error)
    assert isinstance(response, MetadataV1)
    assert not hasattr(response, "error_code")


def test_a_newer_class_is_written_with_the_request_versions_writer() -> None:
    body = ShareFetchV2(
        throttle_time=NONE,
        error_code=ErrorCode.none,
        acquisition_lock_timeout=i32Timedelta.parse(datetime.timedelta(seconds=15)),
        responses=(),
        node_endpoints=(),
    )
    correlation_id, decoded = decode_response(SHARE_FETCH, 1, encode_response(body, 7, 1))
    assert correlation_id == 7
    assert type(decoded).__version__ == 1
    assert isinstance(decoded, ShareFetchV1)
    assert decoded.acquisition_lock_timeout == datetime.timedelta(seconds=15)


def test_the_request_version_decides_the_header_layout() -> None:
    # Metadata v10's classes are flexible (header v1); a v1 request gets header v0.
    node = BrokerId(3)
    body = metadata_v10.MetadataResponse(
        throttle_time=NONE,
        brokers=(metadata_v10.MetadataResponseBroker(node_id=node, host="h", port=i32(9092)),),
        controller_id=node,
        topics=(
            metadata_v10.MetadataResponseTopic(
                error_code=ErrorCode.none, name=TopicName("t"), topic_id=None, partitions=()
            ),
        ),
    )
    correlation_id, decoded = decode_response(METADATA, 1, encode_response(body, 11, 1))
    assert correlation_id == 11
    assert isinstance(decoded, MetadataV1)
    assert [t.name for t in decoded.topics] == ["t"]
    assert decoded.brokers[0].port == 9092


def test_a_large_response_read_an_element_at_a_time_is_the_one_kio_reads() -> None:
    """`decode_response(large=True)` (the client's reader for a big answer, in a thread)."""
    from kio.schema.delete_acls.v3 import response as r
    from kio.static.primitive import i8

    from protocol.messages import response_frame

    acl = r.DeleteAclsMatchingAcl(
        error_code=ErrorCode.none, error_message=None, resource_type=i8(2), resource_name="t",
        pattern_type=i8(3), principal="User:x", host="*", operation=i8(3), permission_type=i8(3),
    )  # fmt: skip
    results = (
        r.DeleteAclsFilterResult(error_code=ErrorCode.none, error_message=None,
                                 matching_acls=(acl,) * 300),
        r.DeleteAclsFilterResult(error_code=ErrorCode.invalid_request, error_message="bad",
                                 matching_acls=()),
    )  # fmt: skip
    body = r.DeleteAclsResponse(throttle_time=NONE, filter_results=results)
    payload = response_frame(body, 7, 3)[4:]
    assert decode_response(31, 3, payload, large=True) == decode_response(31, 3, payload)
    assert decode_response(31, 3, payload, large=True) == (7, body)
