"""Request and response codecs: kio entity lookup by (api key, version), headers, and a builder.

Every message codec comes from kio. This module only knows which kio class to use and how the
header in front of it is laid out, and keeps the readers and writers it builds in a cache.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import pkgutil
import re
import struct
import typing
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any
from typing import NamedTuple
from typing import TypeVar

from kio.index import KioIndexError
from kio.index import load_request_schema
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader
from kio.serial import entity_writer
from kio.serial._introspect import get_field_tag
from kio.static.primitive import i32
from kio.static.protocol import RequestPayload
from kio.static.protocol import ResponsePayload

from protocol import large_requests
from protocol.api_keys import API_VERSIONS
from protocol.errors import ProtocolException
from protocol.framing import SIZE
from protocol.request_bounds import request_walker
from protocol.shoal_apis import REQUESTS as SHOAL_REQUESTS
from protocol.shoal_apis import RESPONSES as SHOAL_RESPONSES
from protocol.shoal_apis import is_shoal_api

# api key, api version, correlation id: the fixed start of every request header version.
HEADER_PREFIX = struct.Struct(">hhi")
_CORRELATION_ID = struct.Struct(">i")  # the whole of response header v0; v1 adds tagged fields
# A response frame's size and header, v0 and v1 (with its empty tagged-field section).
_SIZE_HEADER_V0 = struct.Struct(">ii")
_SIZE_HEADER_V1 = struct.Struct(">iiB")

E = TypeVar("E")


class UnknownApi(ProtocolException, LookupError):
    """kio has no request schema for this (api key, version)."""


class UndecodableRequest(ProtocolException, ValueError):
    """The header or body of a request does not parse."""


# NamedTuples, not frozen dataclasses: built once per request, and a frozen dataclass's
# __init__ (object.__setattr__ per field) costs twice as much.
class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class Request(NamedTuple):
    header: RequestHeader
    body: RequestPayload


class EncodedResponse(NamedTuple):
    """A response body already in wire form for one version, written by a hot API's own
    serialiser (tested byte for byte against kio's); `encode_response` puts the header on."""

    api_key: int
    version: int
    body: bytes
    error_code: int = 0  # the top-level error code
    # Every non-zero code in it, top-level and per partition, for the request metrics.
    error_codes: tuple[int, ...] = ()


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """The api key, version and correlation id: readable even when nothing else is."""
    if len(frame) < HEADER_PREFIX.size:
        raise UndecodableRequest(f"frame of {len(frame)} bytes is shorter than a header")
    key, version, correlation_id = HEADER_PREFIX.unpack_from(frame)
    return key, version, correlation_id


def peek_client_id(frame: bytes) -> str | None:
    """The client id after the header prefix (every header version but v0 has it), for log
    lines about requests that are not decoded; None when absent or unreadable."""
    end = HEADER_PREFIX.size + 2
    if len(frame) < end:
        return None
    (size,) = struct.unpack_from(">h", frame, HEADER_PREFIX.size)
    if size < 0 or len(frame) < end + size:
        return None
    return frame[end : end + size].decode("utf-8", "replace")


@cache
def request_type(api_key: int, version: int) -> type[RequestPayload]:
    if is_shoal_api(api_key):  # Shoal's own (kio has no schema for them)
        if (own := SHOAL_REQUESTS.get((api_key, version))) is None:
            raise UnknownApi(f"api key {api_key} version {version}")
        return own
    try:
        return load_request_schema(api_key, version)
    except KioIndexError as e:
        raise UnknownApi(f"api key {api_key} version {version}") from e


@cache
def response_type(api_key: int, version: int) -> type[ResponsePayload]:
    if is_shoal_api(api_key):
        if (own := SHOAL_RESPONSES.get((api_key, version))) is None:
            raise UnknownApi(f"api key {api_key} version {version}")
        return own
    try:
        return load_response_schema(api_key, version)
    except KioIndexError as e:
        raise UnknownApi(f"api key {api_key} version {version}") from e


@cache
def entity_tagged_defaults(entity: type[Any]) -> tuple[str, ...]:
    """Paths of the tagged fields, anywhere in `entity`'s tree, whose default is an entity.

    kio skips a tagged field whose value equals its default; an entity of another version's
    class never equals it, so such a field goes out on the wire (librdkafka then reads
    Produce v10's `current_leader` -1 as a leader change). A response with any of these must
    be built from its own version's classes.
    """
    return tuple(_entity_tagged_defaults(entity, "", set()))


def _entity_tagged_defaults(entity: type[Any], path: str, seen: set[type[Any]]) -> list[str]:
    if entity in seen:
        return []
    seen.add(entity)
    hints = typing.get_type_hints(entity)
    out = []
    for f in dataclasses.fields(entity):
        if get_field_tag(f) is not None and dataclasses.is_dataclass(f.default):
            out.append(path + f.name)
        for arg in _leaf_types(hints[f.name]):
            if dataclasses.is_dataclass(arg):
                out += _entity_tagged_defaults(arg, f"{path}{f.name}.", seen)
    return out


def _leaf_types(hint: Any) -> list[type[Any]]:
    args = typing.get_args(hint)
    if not args:
        return [hint] if isinstance(hint, type) else []
    return [leaf for arg in args for leaf in _leaf_types(arg)]


@cache
def _reader(entity: type[E]) -> Callable[[Any, int], tuple[E, int]]:
    return entity_reader(entity)  # type: ignore[type-var]


@cache
def _writer(entity: type[E]) -> Callable[[io.BytesIO, E], None]:
    return entity_writer(entity)  # type: ignore[type-var]


# Per (api key, version): the bounds check (`protocol.request_bounds`), the kio readers of the
# header and body, and the body's class name.
_Read = Callable[[Any, int], tuple[Any, int]]
_Plan = tuple[Callable[[Any], int], _Read, _Read, str]
_PLANS: dict[tuple[int, int], _Plan] = {}


def _plan(key: int, version: int) -> _Plan:
    plan = _PLANS.get((key, version))
    if plan is None:
        req_type = request_type(key, version)
        header_type: Any = req_type.__header_schema__
        plan = _PLANS[key, version] = (
            request_walker(req_type),
            _reader(header_type),
            _reader(req_type),
            req_type.__name__,
        )
    return plan


def decode_request(frame: bytes) -> Request:
    """Parse a request frame (without its size prefix).

    :raises UnknownApi: kio has no schema for the request's key and version.
    :raises UndecodableRequest: the header or body does not parse, declares more than the frame
        holds, or holds null where its version forbids it (`protocol.request_bounds`).
    """
    key, version, _ = peek_header(frame)
    return decode_peeked(frame, key, version)


def decode_peeked(frame: bytes, key: int, version: int) -> Request:
    """`decode_request` of a frame whose key and version `peek_header` has already read (a
    connection peeks to pick the handler: once per request is enough)."""
    check_bounds, read_header, read_body, name = _PLANS.get((key, version)) or _plan(key, version)
    try:
        # Before kio: its reader sizes a collection by the count a frame declares, and a
        # count past the frame's end would abort the process.
        check_bounds(frame)
        header, pos = read_header(frame, 0)
        body, _ = read_body(frame, pos)
    except (
        Exception
    ) as e:  # kio raises many kinds (KeyError for an unknown tag...): all mean "does not parse"
        raise UndecodableRequest(f"{name}: {e}") from e
    # Bytes after the fields this version defines are ignored, as Apache Kafka does:
    # librdkafka's all-topics Metadata v12 carries three of them.
    # tuple.__new__: a NamedTuple's own __new__ is Python code, a frame per call.
    new = tuple.__new__
    return new(
        Request, (new(RequestHeader, (key, version, header.correlation_id, header.client_id)), body)
    )


def decode_large_request(frame: bytes) -> Request:
    """`decode_request` for a large frame, in a worker thread: the same request, read an array
    element at a time (`protocol.large_requests`), so the thread lets the event loop run."""
    key, version, _ = peek_header(frame)
    check_bounds, read_header, _, name = _PLANS.get((key, version)) or _plan(key, version)
    try:
        check_bounds(frame)  # as decode_peeked: before anything is read or allocated
        header, pos = read_header(frame, 0)
        body, _ = large_requests.reader(request_type(key, version))(frame, pos)
    except Exception as e:  # as decode_peeked: every failure means "does not parse"
        raise UndecodableRequest(f"{name}: {e}") from e
    return Request(RequestHeader(key, version, header.correlation_id, header.client_id), body)


def encode_request(body: RequestPayload, correlation_id: int, client_id: str | None) -> bytes:
    """Header and body of a request, without the size prefix (the client's side)."""
    header_type: Any = body.__header_schema__
    fields = {f.name for f in dataclasses.fields(header_type)}
    values: dict[str, Any] = {
        "request_api_key": body.__api_key__,
        "request_api_version": body.__version__,
        "correlation_id": correlation_id,
    }
    if "client_id" in fields:
        values["client_id"] = client_id
    buf = io.BytesIO()
    _writer(header_type)(buf, header_type(**values))
    _writer(type(body))(buf, body)
    return buf.getvalue()


def encode_response(
    body: ResponsePayload | EncodedResponse, correlation_id: int, version: int
) -> bytes:
    """Header and body of a response to a request of `version`, without the size prefix.

    `body` may be of a newer version's class than `version` (a handler answers every version
    with one family of classes): the writer of `version` reads only the fields that version
    has, by name, and that version also decides the header. ApiVersions responses always use
    header v0 so that a client that does not yet know our versions can read them (KIP-511).
    """
    if isinstance(body, EncodedResponse):
        return b"".join(_encoded_parts(body, correlation_id, version))
    wire_type = response_type(body.__api_key__, version)
    buf = io.BytesIO()
    if body.__api_key__ == API_VERSIONS or not wire_type.__flexible__:
        _writer(ResponseHeaderV0)(buf, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    else:
        _writer(ResponseHeaderV1)(buf, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    writer: Callable[[io.BytesIO, ResponsePayload], None] = _writer(wire_type)
    writer(buf, body)
    return buf.getvalue()


def response_frame(
    body: ResponsePayload | EncodedResponse, correlation_id: int, version: int
) -> bytes:
    """`encode_response` with its size prefix, as written to the socket. An encoded body
    (record bytes, for a fetch) is copied once, into the frame."""
    if isinstance(body, EncodedResponse):
        if body.version != version:
            raise ValueError(f"an encoded v{body.version} response answers v{version}")
        flexible = _FLEXIBLE_HEADER.get((body.api_key, version))  # once per request: no call
        if flexible is None:
            flexible = _flexible_header(body.api_key, version)
        if flexible:  # header v1: no tagged fields
            return _SIZE_HEADER_V1.pack(len(body.body) + 5, correlation_id, 0) + body.body
        return _SIZE_HEADER_V0.pack(len(body.body) + 4, correlation_id) + body.body
    payload = encode_response(body, correlation_id, version)
    return SIZE.pack(len(payload)) + payload


def _encoded_parts(body: EncodedResponse, correlation_id: int, version: int) -> list[bytes]:
    if body.version != version:
        raise ValueError(f"an encoded v{body.version} response answers v{version}")
    head = _CORRELATION_ID.pack(correlation_id)
    if _flexible_header(body.api_key, version):
        head += b"\x00"  # header v1: no tagged fields
    return [head, body.body]


_FLEXIBLE_HEADER: dict[tuple[int, int], bool] = {}


def _flexible_header(api_key: int, version: int) -> bool:
    """Whether a response of this key and version has header v1 (ApiVersions never does)."""
    flexible = _FLEXIBLE_HEADER.get((api_key, version))
    if flexible is None:
        flexible = _FLEXIBLE_HEADER[api_key, version] = (
            api_key != API_VERSIONS and response_type(api_key, version).__flexible__
        )
    return flexible


def decode_response(
    api_key: int, version: int, payload: bytes, *, large: bool = False
) -> tuple[int, ResponsePayload]:
    """The correlation id and body of a response (the client's side). `large`: read an array
    element at a time (`protocol.large_requests`), for a worker thread that must let the event
    loop run (kio's reader keeps the GIL for a whole array)."""
    resp_type = response_type(api_key, version)
    header_type: Any = (
        ResponseHeaderV0
        if api_key == API_VERSIONS or not resp_type.__flexible__
        else ResponseHeaderV1
    )
    header, pos = _reader(header_type)(payload, 0)
    read = large_requests.reader(resp_type) if large else _reader(resp_type)
    body, _ = read(payload, pos)
    return int(header.correlation_id), body


# The value build() gives a required field that is not set, by kio's kafka_type.
ZERO_VALUES: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    "error_code": ErrorCode.none,
    "float64": 0.0,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "records": None,
    "string": "",
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "uint16": 0,
    "uuid": uuid.UUID(int=0),
}


@cache
def _field_plan(entity: type[Any]) -> tuple[frozenset[str], tuple[tuple[str, Any], ...]]:
    """Names of an entity's fields, and a zero value for each required one."""
    names: set[str] = set()
    required: list[tuple[str, Any]] = []
    for f in dataclasses.fields(entity):
        names.add(f.name)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kafka_type = f.metadata.get("kafka_type")
            required.append((f.name, ZERO_VALUES[kafka_type] if kafka_type else ()))
    return frozenset(names), tuple(required)


# kio's module of one version of one API's request or response: kio.schema.<api>.v<N>.<leaf>
_VERSIONED_MODULE = re.compile(r"(kio\.schema\.\w+)\.v\d+\.(\w+)")


@cache
def _names_in_any_version(entity: type[Any]) -> frozenset[str]:
    """Field names of `entity` in every version kio has of it (same API, same class name)."""
    names = {f.name for f in dataclasses.fields(entity)}
    match = _VERSIONED_MODULE.fullmatch(entity.__module__)
    if match is None:
        return frozenset(names)
    package, leaf = match.groups()
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if not re.fullmatch(r"v\d+", info.name):
            continue
        try:
            module = importlib.import_module(f"{package}.{info.name}.{leaf}")
        except ModuleNotFoundError:
            continue  # this version has no such side (request or response)
        other = getattr(module, entity.__name__, None)
        if other is not None and dataclasses.is_dataclass(other):
            names.update(f.name for f in dataclasses.fields(other))
    return frozenset(names)


def build(entity: type[E], /, **values: Any) -> E:
    """Make a kio entity of any version from the values that version has.

    One body of code can serve many versions of one API: values for fields this version lacks
    are dropped, and required fields not given get their zero value. A name that no version of
    the entity has is a typo, not a version difference.

    :raises TypeError: a keyword names a field that no version of `entity` has.
    """
    names, required = _field_plan(entity)  # type: ignore[arg-type]
    if unknown := values.keys() - names - _names_in_any_version(entity):  # type: ignore[arg-type]
        raise TypeError(f"{entity.__name__} ({entity.__module__}) has no field {sorted(unknown)}")
    kwargs = {k: v for k, v in values.items() if k in names}
    for name, zero in required:
        kwargs.setdefault(name, zero)
    return entity(**kwargs)


def error_response(api_key: int, version: int, code: ErrorCode) -> ResponsePayload:
    """A response of the request's own version that carries only a top-level error.

    Some APIs (Metadata, Produce, ...) have no such field: their response comes back empty.
    """
    entity = response_type(api_key, version)
    if "error_code" not in _names_in_any_version(entity):
        return build(entity)
    return build(entity, error_code=code)


# Entries (nested entities) past which an answer is bulky: encoding it costs milliseconds.
BULKY_ENTRIES = 2_000


def is_bulky(entity: Any) -> bool:
    """Whether `entity` holds more than `BULKY_ENTRIES` nested entities or array elements,
    counted only until that many (cheap for the small answers nearly every request gets): a
    small request may ask for a large answer (OffsetFetch of 50,000 partitions, DescribeAcls
    of every binding), and an array of strings costs as much to encode as one of entities
    (ListTransactions' 50,000 unknown state filters, written back: 150 ms on the loop)."""
    return _entries(entity, BULKY_ENTRIES) < 0


def _entries(entity: Any, budget: int) -> int:
    """`budget` less the entries nested in `entity` (negative once they are more)."""
    cls = type(entity)
    fields = _ARRAY_FIELDS.get(cls)
    if fields is None:
        fields = _ARRAY_FIELDS[cls] = _array_fields(cls)
    for name, of_entities in fields:
        items = getattr(entity, name)
        if not items:
            continue
        budget -= len(items)
        if budget < 0:
            return budget
        if of_entities:
            for item in items:
                budget = _entries(item, budget)
                if budget < 0:
                    return budget
    return budget


# `_array_fields` by class, worked out once.
_ARRAY_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _array_fields(entity: type) -> tuple[tuple[str, bool], ...]:
    """The fields of a kio entity that hold a tuple, each with whether it holds entities."""
    if not dataclasses.is_dataclass(entity):
        return ()
    hints = typing.get_type_hints(entity)
    found = ((f.name, _tuple_of(hints[f.name])) for f in dataclasses.fields(entity))
    return tuple((name, kind == "entities") for name, kind in found if kind is not None)


def _tuple_of(hint: Any) -> str | None:
    """What a `tuple[X, ...]` hint, optional or not, holds: "entities" or "values" (None: not
    a tuple)."""
    for arg in (hint, *typing.get_args(hint)):
        if typing.get_origin(arg) is tuple:
            return "entities" if dataclasses.is_dataclass(typing.get_args(arg)[0]) else "values"
    return None
