"""broker.registry: handlers declared by kio request classes, and the response classes they
answer each version with.

A handler answers every version it serves with one family of response classes, and the
connection writes it with the writer of the request's version, which reads that version's
fields by name. That is sound only when every field of the version exists on the class
answering it, with the same name and wire type, all the way down: checked here for every
handler and every version it serves.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any
from typing import cast

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator import v0 as find_v0
from kio.schema.find_coordinator import v3 as find_v3
from kio.schema.find_coordinator import v4 as find_v4
from kio.schema.find_coordinator import v6 as find_v6
from kio.schema.metadata import v12 as metadata_v12
from kio.schema.types import BrokerId
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.context import BrokerServices
from broker.context import RequestContext
from broker.handlers import build_registry
from broker.registry import Handler
from broker.registry import Registry
from broker.registry import WrongResponse
from broker.registry import handler
from protocol.acl import AclOperation
from protocol.acl import ResourceType as AclResourceType
from protocol.api_keys import FIND_COORDINATOR
from protocol.messages import ZERO_VALUES
from protocol.messages import EncodedResponse
from protocol.messages import RequestHeader
from protocol.messages import decode_response
from protocol.messages import encode_response
from protocol.messages import response_type
from protocol.shoal_apis import is_shoal_api

# build()'s zero values, with bytes where a records field may be null: written and read back.
_ZERO: dict[str, Any] = {**ZERO_VALUES, "records": b""}
_NULL_UUID = uuid.UUID(int=0)  # kio writes it as null, and reads null back as None


def _entity_in(annotation: Any) -> type[Any] | None:
    """The kio entity class an annotation holds (alone, optional, or in a tuple), if any."""
    if dataclasses.is_dataclass(annotation):
        return cast(type[Any], annotation)
    for arg in typing.get_args(annotation):
        found = _entity_in(arg)
        if found is not None:
            return found
    return None


def _is_tuple(annotation: Any) -> bool:
    if typing.get_origin(annotation) is tuple:
        return True
    return typing.get_origin(annotation) is types.UnionType and any(
        typing.get_origin(a) is tuple for a in typing.get_args(annotation)
    )


def _zero(entity: type[Any]) -> Any:
    """An instance with every field set (one element in every list), all values zero."""
    hints = typing.get_type_hints(entity)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        nested = _entity_in(hints[f.name])
        value = _zero(nested) if nested is not None else _ZERO[f.metadata["kafka_type"]]
        values[f.name] = (value,) if _is_tuple(hints[f.name]) else value
    return entity(**values)


def _missing(wire: type[Any], family: type[Any], path: str) -> list[str]:
    """Fields of `wire` that `family` lacks or carries with another wire type, recursively."""
    theirs = {f.name: f for f in dataclasses.fields(family)}
    wire_hints, family_hints = typing.get_type_hints(wire), typing.get_type_hints(family)
    out = []
    for f in dataclasses.fields(wire):
        other = theirs.get(f.name)
        if other is None or f.metadata.get("kafka_type") != other.metadata.get("kafka_type"):
            out.append(f"{path}.{f.name}")
            continue
        nested, their_nested = _entity_in(wire_hints[f.name]), _entity_in(family_hints[f.name])
        if nested is not None and their_nested is not None:
            out += _missing(nested, their_nested, f"{path}.{f.name}")
        elif (nested is None) != (their_nested is None):
            out.append(f"{path}.{f.name}")
    return out


def _same_values(decoded: Any, sent: Any, path: str = "") -> list[str]:
    """Fields of the decoded (wire version) entity whose value differs from what was sent."""
    out = []
    for f in dataclasses.fields(decoded):
        got, want = getattr(decoded, f.name), getattr(sent, f.name)
        if dataclasses.is_dataclass(got):
            out += _same_values(got, want, f"{path}.{f.name}")
        elif isinstance(got, tuple) and got and dataclasses.is_dataclass(got[0]):
            for a, b in zip(got, want, strict=True):
                out += _same_values(a, b, f"{path}.{f.name}[]")
        elif got != want and not (got is None and want == _NULL_UUID):
            out.append(f"{path}.{f.name}: {got!r} != {want!r}")
    return out


SERVED = [(h, v) for h in build_registry() for v in range(h.min_version, h.max_version + 1)]


@pytest.mark.parametrize(("h", "version"), SERVED, ids=[f"{h.name}-v{v}" for h, v in SERVED])
def test_every_version_served_is_written_from_the_class_that_answers_it(
    h: Handler, version: int
) -> None:
    family = h.response_for(version)
    wire = response_type(h.api_key, version)
    assert _missing(wire, family, family.__name__) == []
    sent = _zero(family)
    correlation_id, decoded = decode_response(
        h.api_key, version, encode_response(sent, 42, version)
    )
    assert correlation_id == 42
    assert type(decoded) is wire
    assert _same_values(decoded, sent) == []


def test_the_field_check_sees_a_field_a_newer_class_dropped() -> None:
    # FindCoordinator v4 moved node_id, host and port into a list: v6 cannot answer v3.
    missing = _missing(find_v3.FindCoordinatorResponse, find_v6.FindCoordinatorResponse, "")
    assert {".node_id", ".host", ".port", ".error_code"} <= set(missing)


def test_find_coordinator_answers_each_layout_with_its_own_newest_class() -> None:
    (h,) = [h for h in build_registry() if h.api_key == FIND_COORDINATOR]
    assert [h.response_for(v) for v in range(7)] == [find_v3.FindCoordinatorResponse] * 4 + [
        find_v6.FindCoordinatorResponse
    ] * 3


async def _unused(ctx: RequestContext, request: Any) -> None:
    return None


def test_key_name_and_versions_come_from_the_kio_classes() -> None:
    h = handler(_unused, find_v4.FindCoordinatorRequest, find_v3.FindCoordinatorRequest, acl=())
    assert (h.api_key, h.name, h.min_version, h.max_version) == (10, "FindCoordinator", 3, 4)
    assert h.responses == (find_v4.FindCoordinatorResponse,)  # the newest version's, by default
    assert h.supports(3) and h.supports(4) and not h.supports(2) and not h.supports(5)


@pytest.mark.parametrize(
    "requests",
    [
        (),
        (find_v0.FindCoordinatorRequest, find_v0.FindCoordinatorRequest),
        (find_v0.FindCoordinatorRequest, find_v3.FindCoordinatorRequest),
        (metadata_v12.MetadataRequest, find_v3.FindCoordinatorRequest),
    ],
    ids=["empty", "duplicate version", "not contiguous", "two api keys"],
)
def test_a_bad_declaration_is_refused(requests: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        handler(_unused, *requests, responses=(find_v3.FindCoordinatorResponse,), acl=())


def test_responses_of_another_api_are_refused() -> None:
    with pytest.raises(ValueError):
        handler(
            _unused,
            find_v3.FindCoordinatorRequest,
            responses=(metadata_v12.MetadataResponse,),
            acl=(),
        )


def test_an_api_key_registered_twice_is_refused() -> None:
    first = handler(_unused, find_v3.FindCoordinatorRequest, acl=())
    second = handler(_unused, find_v4.FindCoordinatorRequest, acl=())
    with pytest.raises(ValueError, match="twice"):
        Registry([first, second])


def _context(version: int) -> RequestContext:
    # The handlers below never look at the services.
    header = RequestHeader(FIND_COORDINATOR, version, 1, "test")
    return RequestContext(cast(BrokerServices, None), header, "test")


def _v3_answer() -> find_v3.FindCoordinatorResponse:
    return find_v3.FindCoordinatorResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        error_message=None,
        node_id=BrokerId(1),
        host="h",
        port=i32(1),
    )


async def test_dispatch_returns_the_declared_class() -> None:
    async def answer(ctx: RequestContext, request: find_v3.FindCoordinatorRequest) -> Any:
        return _v3_answer()

    h = handler(answer, find_v3.FindCoordinatorRequest, acl=())
    request = find_v3.FindCoordinatorRequest(key="g")
    assert await h.dispatch(_context(3), request) == _v3_answer()


async def test_dispatch_refuses_an_undeclared_response_class() -> None:
    async def answer(ctx: RequestContext, request: find_v4.FindCoordinatorRequest) -> Any:
        return _v3_answer()  # v4 has no top-level host: v3's class cannot answer it

    h = handler(answer, find_v4.FindCoordinatorRequest, acl=())
    with pytest.raises(WrongResponse):
        await h.dispatch(_context(4), find_v4.FindCoordinatorRequest(coordinator_keys=("g",)))


@pytest.mark.parametrize(("key", "version"), [(FIND_COORDINATOR, 3), (FIND_COORDINATOR, 2), (0, 3)])
async def test_dispatch_takes_encoded_bytes_only_of_its_own_key_and_version(
    key: int, version: int
) -> None:
    answer_bytes = EncodedResponse(key, version, b"")

    async def answer(ctx: RequestContext, request: find_v3.FindCoordinatorRequest) -> Any:
        return answer_bytes

    h = handler(answer, find_v3.FindCoordinatorRequest, acl=())
    request = find_v3.FindCoordinatorRequest(key="g")
    if (key, version) == (FIND_COORDINATOR, 3):
        assert await h.dispatch(_context(3), request) is answer_bytes
    else:
        with pytest.raises(WrongResponse):
            await h.dispatch(_context(3), request)


async def test_dispatch_refuses_a_request_class_not_declared() -> None:
    h = handler(_unused, find_v3.FindCoordinatorRequest, acl=())
    with pytest.raises(TypeError):
        await h.dispatch(
            _context(3),
            metadata_v12.MetadataRequest(topics=None, include_topic_authorized_operations=False),
        )


# Kafka's authorization table (docs "Authorization and ACLs", KIP-932 for share groups), as
# (operation, resource type) per API: every handler declares exactly these.
_O, _R = AclOperation, AclResourceType
KAFKA_ACL_TABLE: dict[str, set[tuple[AclOperation, AclResourceType]]] = {
    "Produce": {(_O.WRITE, _R.TOPIC), (_O.WRITE, _R.TRANSACTIONAL_ID)},
    "Fetch": {(_O.READ, _R.TOPIC)},
    "ListOffsets": {(_O.DESCRIBE, _R.TOPIC)},
    "Metadata": {(_O.DESCRIBE, _R.TOPIC), (_O.CREATE, _R.CLUSTER), (_O.CREATE, _R.TOPIC)},
    "OffsetCommit": {(_O.READ, _R.GROUP), (_O.READ, _R.TOPIC)},
    "OffsetFetch": {(_O.DESCRIBE, _R.GROUP), (_O.DESCRIBE, _R.TOPIC)},
    "OffsetDelete": {(_O.DELETE, _R.GROUP), (_O.READ, _R.TOPIC)},
    "FindCoordinator": {(_O.DESCRIBE, _R.GROUP), (_O.DESCRIBE, _R.TRANSACTIONAL_ID)},
    "JoinGroup": {(_O.READ, _R.GROUP)},
    "Heartbeat": {(_O.READ, _R.GROUP)},
    "LeaveGroup": {(_O.READ, _R.GROUP)},
    "SyncGroup": {(_O.READ, _R.GROUP)},
    "DescribeGroups": {(_O.DESCRIBE, _R.GROUP)},
    "ListGroups": {(_O.DESCRIBE, _R.CLUSTER), (_O.DESCRIBE, _R.GROUP)},
    "ApiVersions": set(),
    "CreateTopics": {(_O.CREATE, _R.CLUSTER), (_O.CREATE, _R.TOPIC)},
    "DeleteTopics": {(_O.DELETE, _R.TOPIC)},
    "DeleteRecords": {(_O.DELETE, _R.TOPIC)},
    "DeleteGroups": {(_O.DELETE, _R.GROUP)},
    "InitProducerId": {
        (_O.IDEMPOTENT_WRITE, _R.CLUSTER),
        (_O.WRITE, _R.TOPIC),
        (_O.WRITE, _R.TRANSACTIONAL_ID),
    },
    "AddPartitionsToTxn": {
        (_O.WRITE, _R.TRANSACTIONAL_ID),
        (_O.WRITE, _R.TOPIC),
        (_O.CLUSTER_ACTION, _R.CLUSTER),
    },
    "AddOffsetsToTxn": {(_O.WRITE, _R.TRANSACTIONAL_ID), (_O.READ, _R.GROUP)},
    "EndTxn": {(_O.WRITE, _R.TRANSACTIONAL_ID)},
    "DescribeTransactions": {(_O.DESCRIBE, _R.TRANSACTIONAL_ID), (_O.DESCRIBE, _R.TOPIC)},
    "ListTransactions": {(_O.DESCRIBE, _R.TRANSACTIONAL_ID)},
    "DescribeProducers": {(_O.READ, _R.TOPIC)},
    "WriteTxnMarkers": {(_O.CLUSTER_ACTION, _R.CLUSTER)},
    # The share-state RPCs a group coordinator sends the share coordinator (KIP-932; Kafka's
    # `KafkaApis.handleInitializeShareGroupStateRequest` and siblings check CLUSTER_ACTION).
    "InitializeShareGroupState": {(_O.CLUSTER_ACTION, _R.CLUSTER)},
    "DeleteShareGroupState": {(_O.CLUSTER_ACTION, _R.CLUSTER)},
    "ReadShareGroupStateSummary": {(_O.CLUSTER_ACTION, _R.CLUSTER)},
    "TxnOffsetCommit": {(_O.WRITE, _R.TRANSACTIONAL_ID), (_O.READ, _R.GROUP), (_O.READ, _R.TOPIC)},
    "DescribeAcls": {(_O.DESCRIBE, _R.CLUSTER)},
    "CreateAcls": {(_O.ALTER, _R.CLUSTER)},
    "DeleteAcls": {(_O.ALTER, _R.CLUSTER)},
    "SaslHandshake": set(),
    "SaslAuthenticate": set(),
    "DescribeUserScramCredentials": {(_O.DESCRIBE, _R.CLUSTER)},
    "AlterUserScramCredentials": {(_O.ALTER, _R.CLUSTER)},
    "DescribeConfigs": {(_O.DESCRIBE_CONFIGS, r) for r in (_R.TOPIC, _R.GROUP, _R.CLUSTER)},
    "AlterConfigs": {(_O.ALTER_CONFIGS, r) for r in (_R.TOPIC, _R.GROUP, _R.CLUSTER)},
    "IncrementalAlterConfigs": {(_O.ALTER_CONFIGS, r) for r in (_R.TOPIC, _R.GROUP, _R.CLUSTER)},
    "CreatePartitions": {(_O.ALTER, _R.TOPIC)},
    "DescribeCluster": {(_O.DESCRIBE, _R.CLUSTER)},
    "DescribeLogDirs": {(_O.DESCRIBE, _R.CLUSTER)},
    "ConsumerGroupHeartbeat": {(_O.READ, _R.GROUP), (_O.DESCRIBE, _R.TOPIC)},
    "ConsumerGroupDescribe": {(_O.DESCRIBE, _R.GROUP)},
    "ShareGroupHeartbeat": {(_O.READ, _R.GROUP), (_O.DESCRIBE, _R.TOPIC)},
    "ShareGroupDescribe": {(_O.DESCRIBE, _R.GROUP)},
    "ShareFetch": {(_O.READ, _R.GROUP), (_O.READ, _R.TOPIC)},
    "ShareAcknowledge": {(_O.READ, _R.GROUP), (_O.READ, _R.TOPIC)},
    "DescribeShareGroupOffsets": {(_O.DESCRIBE, _R.GROUP), (_O.DESCRIBE, _R.TOPIC)},
    "AlterShareGroupOffsets": {(_O.READ, _R.GROUP), (_O.READ, _R.TOPIC)},
    "DeleteShareGroupOffsets": {(_O.DELETE, _R.GROUP), (_O.READ, _R.TOPIC)},
}


def test_every_handler_declares_kafkas_acl_checks() -> None:
    declared = {h.name: set(h.acl) for h in build_registry() if not is_shoal_api(h.api_key)}
    assert declared == KAFKA_ACL_TABLE


def test_shoals_own_apis_declare_their_checks() -> None:
    """TxnShareAcknowledge checks what TxnOffsetCommit does (Kafka's table for that API);
    TxnShareStaged, sent between processes, what the brokers' WriteTxnMarkers does."""
    declared = {h.name: set(h.acl) for h in build_registry() if is_shoal_api(h.api_key)}
    assert declared == {
        "TxnShareAcknowledge": {
            (_O.WRITE, _R.TRANSACTIONAL_ID), (_O.READ, _R.GROUP), (_O.READ, _R.TOPIC)
        },
        "TxnShareStaged": {(_O.CLUSTER_ACTION, _R.CLUSTER)},
    }  # fmt: skip


def test_a_handler_must_declare_its_acl_checks() -> None:
    with pytest.raises(TypeError):
        handler(_unused, find_v3.FindCoordinatorRequest)  # type: ignore[call-arg]


# What Apache Kafka 4.x serves of each API Shoal implements: `validVersions` in
# clients/src/main/resources/common/message/<Api>Request.json of Kafka 4.2 (the same files kio
# 0.6.5 is generated from, and kafka-python 3.0.12 ships in kafka/protocol/schemas/resources).
# The old versions are those KIP-896 removed in 4.0 (unchanged in 4.1 and 4.2): Produce v0-2,
# Fetch v0-3, ListOffsets v0, OffsetCommit v0-1, OffsetFetch v0, CreateTopics v0-1, DeleteTopics
# v0, DescribeConfigs v0, DescribeLogDirs v0, the ACL APIs v0. InitProducerId v6 is
# `latestVersionUnstable` (2PC, KIP-939): a broker serves it only with
# unstable.api.versions.enable, so 0-5.
KAFKA_4_VERSIONS: dict[str, tuple[int, int]] = {
    "Produce": (3, 13), "Fetch": (4, 18), "ListOffsets": (1, 11), "Metadata": (0, 13),
    "OffsetCommit": (2, 10), "OffsetFetch": (1, 10), "OffsetDelete": (0, 0),
    "FindCoordinator": (0, 6), "JoinGroup": (0, 9), "Heartbeat": (0, 4), "LeaveGroup": (0, 5),
    "SyncGroup": (0, 5), "DescribeGroups": (0, 6), "ListGroups": (0, 5), "ApiVersions": (0, 4),
    "CreateTopics": (2, 7), "DeleteTopics": (1, 6), "DeleteRecords": (0, 2),
    "DeleteGroups": (0, 2), "InitProducerId": (0, 5), "DescribeAcls": (1, 3),
    "CreateAcls": (1, 3), "DeleteAcls": (1, 3), "SaslHandshake": (0, 1),
    "SaslAuthenticate": (0, 2), "DescribeUserScramCredentials": (0, 0),
    "AlterUserScramCredentials": (0, 0), "DescribeConfigs": (1, 4), "AlterConfigs": (0, 2),
    "IncrementalAlterConfigs": (0, 1), "CreatePartitions": (0, 3), "DescribeCluster": (0, 2),
    "DescribeLogDirs": (1, 5),
    "ConsumerGroupHeartbeat": (0, 1), "ConsumerGroupDescribe": (0, 1),
    "ShareGroupHeartbeat": (1, 1), "ShareGroupDescribe": (1, 1), "ShareFetch": (1, 2),
    "ShareAcknowledge": (1, 2), "DescribeShareGroupOffsets": (0, 1),
    "AlterShareGroupOffsets": (0, 0), "DeleteShareGroupOffsets": (0, 0),
    "AddPartitionsToTxn": (0, 5), "AddOffsetsToTxn": (0, 4), "EndTxn": (0, 5),
    "TxnOffsetCommit": (0, 5), "DescribeTransactions": (0, 0), "ListTransactions": (0, 2),
    "DescribeProducers": (0, 0), "WriteTxnMarkers": (1, 2),
    "InitializeShareGroupState": (0, 0), "DeleteShareGroupState": (0, 0),
    "ReadShareGroupStateSummary": (0, 1),
}  # fmt: skip
# Newer versions Kafka 4.x serves that Shoal does not yet, and the newest Shoal serves:
# Produce v13, OffsetCommit v10 and OffsetFetch v10 name topics by id only (KIP-516, KIP-848);
# Fetch v17-18 add replica fields (KIP-853, KIP-1166) while Fetch is being reworked; ListOffsets
# v11 asks for the earliest offset waiting for tiered storage (KIP-1023); ListTransactions v2
# filters by a client's regular expression over every transactional id (KIP-1152).
NEWER_IN_KAFKA = {
    "Produce": 12, "Fetch": 16, "ListOffsets": 10, "OffsetCommit": 9, "OffsetFetch": 9,
    "ListTransactions": 1,
}  # fmt: skip


def test_every_api_serves_from_kafka_4s_oldest_version_to_its_newest() -> None:
    """A version Kafka 4 removed is not served (a client gets what Kafka gives it: a closed
    connection), and a version Kafka 4 still serves is, unless listed in NEWER_IN_KAFKA."""
    served = {
        h.name: (h.min_version, h.max_version)
        for h in build_registry()
        if not is_shoal_api(h.api_key)
    }
    expected = {
        name: (low, NEWER_IN_KAFKA.get(name, high))
        for name, (low, high) in KAFKA_4_VERSIONS.items()
    }
    assert served == expected


def test_api_versions_advertises_produce_from_v0_as_kafka_4_does() -> None:
    """ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION (KAFKA-18659): librdkafka releases
    from before the fix of its issue 4956 turn compression off unless the broker lists Produce
    v0, so Kafka 4 lists it and refuses v0-2 when sent. Every other API is advertised as
    served."""
    advertised = {h.name: (h.advertised_min_version, h.min_version) for h in build_registry()}
    assert advertised.pop("Produce") == (0, 3)
    assert all(low == served for low, served in advertised.values())


def test_a_handler_cannot_advertise_from_a_version_newer_than_it_serves() -> None:
    assert handler(_unused, find_v3.FindCoordinatorRequest, acl=()).advertised_min_version == 3
    assert handler(
        _unused, find_v3.FindCoordinatorRequest, acl=(), advertise_from=0
    ).advertised_min_version == 0  # fmt: skip
    with pytest.raises(ValueError, match="advertised from v4"):
        handler(_unused, find_v3.FindCoordinatorRequest, acl=(), advertise_from=4)
