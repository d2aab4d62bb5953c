"""Shoal's own API schemas (`protocol.shoal_apis`) carry kio's class variables: every entity
inherits key, version, flexibility and header from its message's base, and only the
top-level request and response say they are one (kio's readers and `protocol.messages` look
them up by class)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType

from protocol import shoal_apis


def _entities(top: Any) -> list[Any]:
    """`top` and every nested entity type under it."""
    out = [top]
    for f in dataclasses.fields(top):
        inner = getattr(f.type, "__args__", (f.type,))[0]
        if dataclasses.is_dataclass(inner) and isinstance(inner, type):
            out += _entities(inner)
    return out


def test_each_entity_has_its_message_class_vars() -> None:
    for table, kind, header in (
        (shoal_apis.REQUESTS, EntityType.request, RequestHeader),
        (shoal_apis.RESPONSES, EntityType.response, ResponseHeader),
    ):
        nested = 0
        for (key, version), top in table.items():
            top_and_nested = _entities(top)
            nested += len(top_and_nested) - 1
            for entity in top_and_nested:
                assert entity.__type__ == (kind if entity is top else EntityType.nested)
                assert (entity.__api_key__, entity.__version__) == (key, version)
                assert entity.__flexible__ is True
                assert entity.__header_schema__ is header
        assert nested  # TxnShareAcknowledge's topics and partitions (TxnShareStaged has none)
