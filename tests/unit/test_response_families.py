"""A handler may answer an older version with a newer version's classes only where kio writes
the same bytes: not where a tagged field's default is an entity (see
`protocol.messages.entity_tagged_defaults`)."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch import v12 as fetch_v12
from kio.schema.fetch import v15 as fetch_v15
from kio.schema.produce import v9
from kio.schema.produce import v10
from kio.schema.produce import v11
from kio.schema.produce import v12

from broker.handlers import HANDLERS
from broker.handlers import produce
from broker.registry import handler
from protocol.messages import encode_response
from protocol.messages import entity_tagged_defaults


def test_the_tagged_entity_defaults_of_produce_and_fetch() -> None:
    assert entity_tagged_defaults(v10.ProduceResponse) == (
        "responses.partition_responses.current_leader",
    )
    assert entity_tagged_defaults(v9.ProduceResponse) == ()
    assert "responses.partitions.current_leader" in entity_tagged_defaults(fetch_v15.FetchResponse)
    assert entity_tagged_defaults(fetch_v12.FetchResponse) != ()  # v12 answers with its own


def test_the_registry_refuses_a_newer_family_for_such_a_version() -> None:
    async def handle(ctx: object, request: object) -> None:
        return None

    with pytest.raises(ValueError, match="v10 has tagged fields with entity defaults"):
        handler(handle, v10.ProduceRequest, v11.ProduceRequest, v12.ProduceRequest, acl=())


def test_every_registered_handler_passes_the_check() -> None:
    assert any(h.name == "Produce" for h in HANDLERS)  # they were built, so the check held


def _partition(m: object) -> object:
    return m.PartitionProduceResponse(  # type: ignore[attr-defined]
        index=0, error_code=ErrorCode.none, base_offset=5, log_start_offset=0, record_errors=(),
        error_message=None,
    )  # fmt: skip


@pytest.mark.parametrize("version", [10, 11])
def test_produce_v10_and_v11_bodies_have_no_tagged_leader(version: int) -> None:
    """What the handler builds for v10 encodes as a genuine v10 body with defaults would."""
    m = produce.RESPONSES[version]
    body = m.ProduceResponse(
        responses=(m.TopicProduceResponse(name="t", partition_responses=(_partition(m),)),),
        throttle_time=datetime.timedelta(0),
    )
    stray = v12.ProduceResponse(
        responses=(
            v12.response.TopicProduceResponse(
                name="t", partition_responses=(_partition(v12.response),)
            ),
        ),
        throttle_time=datetime.timedelta(0),
    )
    good, bad = encode_response(body, 1, version), encode_response(stray, 1, version)
    assert len(bad) - len(good) == 11  # the stray tag: what v12's classes used to put out
