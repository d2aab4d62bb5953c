"""Huge request frames, built in a fraction of the time kio would take to encode them.

kio writes a million-element array at a few microseconds an element. Here kio encodes the
request once with one element in the array to grow, and the element's bytes are then repeated
(with a counter written over a sentinel where the elements must differ) and spliced in place of
the one, behind the new array length. What kio wrote around the array stays as it was, so the
frame is the one kio would have written for the whole request.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from kio.serial import entity_writer
from kio.static.protocol import RequestPayload

from protocol.framing import frame
from protocol.messages import encode_request
from protocol.wire import INT32
from protocol.wire import uvarint

Fill = Callable[[int], bytes]


def entity_bytes(entity: Any) -> bytes:
    """An entity (an array's element) as kio writes it."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def string_bytes(value: str, flexible: bool) -> bytes:
    """A string as an element of an array of strings."""
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else len(data).to_bytes(2, "big")) + data


def grown(
    body: RequestPayload, one: bytes, count: int, sentinel: bytes = b"", fill: Fill | None = None
) -> bytes:
    """The frame of `body`, whose array holding one element written `one` holds `count` copies
    of it instead; with `fill`, copy i has `fill(i)` (as many bytes) in place of `sentinel`."""
    encoded = encode_request(body, 1, "stall-test")
    at = encoded.find(one)
    assert at > 0 and encoded.find(one, at + 1) == -1, "the element is not unique in the request"
    flexible = bool(body.__flexible__)
    prefix = uvarint(2) if flexible else INT32.pack(1)
    assert encoded[at - len(prefix) : at] == prefix, "the element is not alone in its array"
    if fill is None:
        items = one * count
    else:
        head, found, tail = one.partition(sentinel)
        assert found and len(fill(0)) == len(sentinel), "the sentinel is not in the element"
        items = b"".join([head + fill(i) + tail for i in range(count)])
    length = uvarint(count + 1) if flexible else INT32.pack(count)
    return frame(encoded[: at - len(prefix)] + length + items + encoded[at + len(one) :])
