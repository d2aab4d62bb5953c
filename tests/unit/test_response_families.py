"""A handler may answer an older version with a newer version's classes only where kio writes
the same bytes: not where a tagged field's default is an entity (see
`protocol.messages.entity_tagged_defaults`)."""

from __future__ import annotations

import pytest
from kio.schema.fetch import v12 as fetch_v12
from kio.schema.fetch import v15 as fetch_v15
from kio.schema.produce import v9
from kio.schema.produce import v10
from kio.schema.produce import v11
from kio.schema.produce import v12

from broker.handlers import HANDLERS
from broker.registry import handler
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
