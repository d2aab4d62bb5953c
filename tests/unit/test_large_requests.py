"""`protocol.large_requests` reads what kio's native reader reads, for every request the broker
serves: the same object from the same bytes, and a refusal where kio refuses."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.serial import entity_writer
from kio.static.primitive import Records

from broker.handlers import build_registry
from protocol.large_requests import reader
from protocol.messages import UndecodableRequest
from protocol.messages import decode_large_request
from protocol.messages import decode_request
from protocol.messages import encode_request

st.register_type_strategy(Records, st.one_of(st.none(), st.binary(max_size=64)))
SERVED = sorted(
    {r for h in build_registry() for r in h.requests}, key=lambda r: (r.__api_key__, r.__version__)
)


def _encoded(value: Any) -> bytes:
    buf = io.BytesIO()
    try:
        entity_writer(type(value))(buf, value)
    except (ValueError, OverflowError):  # a value kio cannot write (a huge timedelta)
        assume(False)
    return buf.getvalue()


def _outcome(read: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "read", read(raw, 0)
    except Exception:
        return "refused", None


requests = st.sampled_from(SERVED).flatmap(st.from_type)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests)
def test_the_same_request_from_the_same_bytes(value: Any) -> None:
    raw = _encoded(value)
    kind: type = type(value)
    # kio writes some values its reader refuses (a retention time past timedelta's range).
    assume(_outcome(entity_reader(kind), raw)[0] == "read")
    read, size = reader(kind)(raw, 0)
    assert (read, size) == entity_reader(kind)(raw, 0)
    assert read == value and size == len(raw)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests, st.data())
def test_cut_bytes_are_refused_where_kio_refuses_them(value: Any, data: st.DataObject) -> None:
    """Cut short anywhere. (Not flipped: a flipped length can make kio's reader allocate
    gigabytes and abort the process, issue 27's crash; this reader allocates as it reads.)"""
    raw = _encoded(value)
    assume(raw)
    cut = raw[: data.draw(st.integers(0, len(raw) - 1), label="at")]
    kind: type = type(value)
    assert _outcome(reader(kind), cut) == _outcome(entity_reader(kind), cut)


def test_a_whole_frame_decodes_as_decode_request_does() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest
    from kio.schema.metadata.v12.request import MetadataRequestTopic
    from kio.schema.types import TopicName

    body = MetadataRequest(
        topics=tuple(
            MetadataRequestTopic(topic_id=None, name=TopicName(f"t{i}")) for i in range(1000)
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    frame = encode_request(body, 42, "client")
    assert decode_large_request(frame) == decode_request(frame)
    with pytest.raises(UndecodableRequest):
        decode_large_request(frame[:-10])


def test_an_answer_is_bulky_past_its_entries_limit() -> None:
    """A small request may ask for a large answer: it is encoded off the loop too."""
    from kio.schema.offset_fetch.v9 import response as r

    from protocol.messages import BULKY_ENTRIES
    from protocol.messages import build
    from protocol.messages import is_bulky

    def answer(partitions: int) -> r.OffsetFetchResponse:
        rows = tuple(
            build(r.OffsetFetchResponsePartitions, partition_index=i) for i in range(partitions)
        )
        topic = build(r.OffsetFetchResponseTopics, name="t", partitions=rows)
        group = build(r.OffsetFetchResponseGroup, group_id="g", topics=(topic,))
        return build(r.OffsetFetchResponse, groups=(group,))

    assert not is_bulky(answer(10))
    assert not is_bulky(answer(BULKY_ENTRIES - 3))  # with its group and topic: the limit
    assert is_bulky(answer(BULKY_ENTRIES))


def test_an_answer_of_many_strings_is_bulky_too() -> None:
    """ListTransactions lists back the state filters it does not know: 50,000 of them took
    150 ms to encode on the loop (the stall test's list_transactions case)."""
    from kio.schema.list_transactions.v1 import response as r

    from protocol.messages import BULKY_ENTRIES
    from protocol.messages import build
    from protocol.messages import is_bulky

    def answer(filters: int) -> r.ListTransactionsResponse:
        unknown = tuple(f"state-{i}" for i in range(filters))
        return build(r.ListTransactionsResponse, unknown_state_filters=unknown)

    assert not is_bulky(answer(BULKY_ENTRIES))
    assert is_bulky(answer(BULKY_ENTRIES + 1))
