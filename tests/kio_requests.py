"""Random requests of every (api key, version) the broker serves, built from kio's schemas, and
their bytes with the place of every length in them.

For the bounds check's unit tests (tests/unit/test_request_bounds.py) and the wire fuzzer
(tests/integration/test_request_fuzzer.py). `random_request` makes a kio request object with
values chosen to find bugs (edges of each integer type, null where the version allows it,
names from a small pool so that requests meet each other's topics and groups); `encode` writes
it as kio would (a unit test holds the two byte for byte) and returns, beside the bytes, every
`Site`: where a count, length, tagged-field count or tagged-field size starts, so a fuzzer can
rewrite it with a hostile value.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import uuid
from typing import Any
from typing import NamedTuple

from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import EntityField
from kio.serial._introspect import EntityTupleField
from kio.serial._introspect import PrimitiveField
from kio.serial._introspect import PrimitiveTupleField
from kio.serial._introspect import classify_field
from kio.serial._introspect import get_field_tag
from kio.serial._introspect import get_schema_field_type
from kio.serial._introspect import is_optional
from kio.static.protocol import RequestPayload

from broker.handlers import HANDLERS
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch

# Names shared by the requests, so that one request meets what another made.
TOPIC = "fuzz-topic"
GROUP = "fuzz-group"
NAMES = ("", TOPIC, GROUP, "fuzz-share", "t", "m" * 22, "\u00e9t\u00e9", "x" * 40)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_PACK = {
    "int8": ">b",
    "int16": ">h",
    "int32": ">i",
    "int64": ">q",
    "uint8": ">B",
    "uint16": ">H",
    "uint32": ">I",
    "uint64": ">Q",
    "float64": ">d",
}


def served() -> list[type[RequestPayload]]:
    """Every request class the broker's registry serves, by api key then version."""
    return [r for h in sorted(HANDLERS, key=lambda h: h.api_key) for r in h.requests]


class Site(NamedTuple):
    """Where a length-like value starts in an encoded request."""

    pos: int
    width: int  # its bytes as written
    # "compact" (a uvarint N + 1, 0 for null), "int16" or "int32" (-1 for null), or "uvarint"
    # (a plain count: of tagged fields, or a tagged field's size)
    encoding: str
    role: str  # "array", "string", "bytes", "tags" (a tagged-field count) or "tag_size"
    nullable: bool  # may this field be null in this version?
    path: str


# --- values ----------------------------------------------------------------------------------


class Values:
    """Random values for kio fields. `deep` makes every array hold several elements (and some
    many), so the frame reaches the schema's deepest level many times over."""

    def __init__(
        self, rng: random.Random, *, deep: bool = False, uuids: tuple[uuid.UUID, ...] = ()
    ) -> None:
        self.rng = rng
        self.deep = deep
        self.uuids = uuids  # ids that name something (a topic), used half the time
        self.budget = 400  # elements of all arrays of a deep request

    def integer(self, kafka_type: str) -> int:
        low, high = _INT_RANGES[kafka_type]
        roll = self.rng.random()
        if roll < 0.5:
            return max(low, min(high, self.rng.randint(-1, 8)))
        if roll < 0.75:
            return self.rng.choice((low, high, 0, max(low, -1), high // 2 + 1))
        return self.rng.randint(low, high)

    def string(self) -> str:
        if self.rng.random() < 0.8:
            return self.rng.choice(NAMES)
        return "".join(self.rng.choice("abcxyz-._\u00e9") for _ in range(self.rng.randint(0, 12)))

    def records(self) -> bytes:
        if self.rng.random() < 0.5:
            batch = [NewRecord(b"k", b"v" * self.rng.randint(0, 20))] * self.rng.randint(1, 3)
            return build_batch(batch, timestamp_ms=1_700_000_000_000)
        return self.rng.randbytes(self.rng.randint(0, 80))

    def primitive(self, kafka_type: str, nullable: bool) -> Any:
        if nullable and self.rng.random() < 0.2:
            return None
        rng = self.rng
        if kafka_type in _INT_RANGES:
            return self.integer(kafka_type)
        simple = {
            "bool": lambda: rng.random() < 0.5,
            "string": self.string,
            "bytes": lambda: rng.randbytes(rng.randint(0, 24)),
            "records": self.records,
            "float64": lambda: rng.choice((0.0, 1.5, -1.0, 1e300)),
            "uuid": self.uuid_value,
            "error_code": lambda: rng.choice(list(ErrorCode)),
            "timedelta_i32": lambda: datetime.timedelta(milliseconds=self.integer("int32")),
            "timedelta_i64": lambda: datetime.timedelta(milliseconds=self.integer("int32")),
        }
        return simple[kafka_type]()

    def uuid_value(self) -> uuid.UUID:
        if self.uuids and self.rng.random() < 0.5:
            return self.rng.choice(self.uuids)
        return uuid.UUID(int=self.rng.getrandbits(128) | 1)  # all zeros reads as None

    def count(self) -> int:
        if not self.deep:
            return self.rng.choice((0, 1, 1, 1, 2, 3))
        # Now and then a long array (the bounds check tries those as all alike first), while
        # the request's elements stay within a budget.
        count = self.rng.randint(17, 40) if self.rng.random() < 0.15 else self.rng.randint(2, 4)
        count = min(count, self.budget)
        self.budget -= count
        return count

    def entity(self, entity: type[Any]) -> Any:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(entity):
            tagged = get_field_tag(f) is not None
            if tagged and self.rng.random() < 0.5:
                continue  # left at its default: not written
            values[f.name] = self.field(f, tagged)
        return entity(**values)

    def field(self, f: dataclasses.Field[Any], tagged: bool) -> Any:
        kind = classify_field(f)
        nullable = is_optional(f)
        if isinstance(kind, PrimitiveField):
            # kio writes a tagged primitive with its non-nullable writer.
            return self.primitive(get_schema_field_type(f), nullable and not tagged)
        if nullable and self.rng.random() < 0.2:
            return None
        if isinstance(kind, PrimitiveTupleField):
            kafka_type = get_schema_field_type(f)
            return tuple(self.primitive(kafka_type, False) for _ in range(self.count()))
        if isinstance(kind, EntityField):
            return self.entity(kind.type_)
        assert isinstance(kind, EntityTupleField)
        return tuple(self.entity(kind.type_) for _ in range(self.count()))


def random_request(
    rng: random.Random,
    request_type: type[RequestPayload],
    *,
    deep: bool = False,
    uuids: tuple[uuid.UUID, ...] = (),
) -> RequestPayload:
    return Values(rng, deep=deep, uuids=uuids).entity(request_type)  # type: ignore[no-any-return]


# --- encoding, with the sites -----------------------------------------------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Writer:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.sites: list[Site] = []

    def length(
        self, value: int | None, *, compact: bool, legacy: str, role: str, nullable: bool, path: str
    ) -> None:
        """A count or length (None: null), remembered as a site."""
        pos = len(self.buf)
        if compact:
            self.buf += uvarint(0 if value is None else value + 1)
            encoding = "compact"
        else:
            self.buf += struct.pack(
                ">h" if legacy == "int16" else ">i", -1 if value is None else value
            )
            encoding = legacy
        self.sites.append(Site(pos, len(self.buf) - pos, encoding, role, nullable, path))

    def uvarint(self, value: int, role: str, path: str) -> None:
        """A plain uvarint count (a tagged-field count or size), remembered as a site."""
        pos = len(self.buf)
        self.buf += uvarint(value)
        self.sites.append(Site(pos, len(self.buf) - pos, "uvarint", role, False, path))

    def primitive(
        self, kafka_type: str, value: Any, *, compact: bool, nullable: bool, path: str
    ) -> None:
        if kafka_type in _PACK:
            self.buf += struct.pack(_PACK[kafka_type], value)
        elif kafka_type == "bool":
            self.buf.append(1 if value else 0)
        elif kafka_type == "uuid":
            self.buf += b"\x00" * 16 if value is None else value.bytes
        elif kafka_type == "error_code":
            self.buf += struct.pack(">h", int(value))
        elif kafka_type in ("timedelta_i32", "timedelta_i64"):
            ms = int(value / datetime.timedelta(milliseconds=1))
            self.buf += struct.pack(">i" if kafka_type == "timedelta_i32" else ">q", ms)
        elif kafka_type in ("string", "legacy_string"):
            data = None if value is None else value.encode()
            legacy = kafka_type == "legacy_string"
            self.length(
                None if data is None else len(data),
                compact=compact and not legacy,
                legacy="int16",
                role="string",
                nullable=nullable,
                path=path,
            )
            self.buf += data or b""
        elif kafka_type in ("bytes", "records"):
            data = None if value is None else bytes(value)
            self.length(
                None if data is None else len(data),
                compact=compact,
                legacy="int32",
                role="bytes",
                nullable=nullable,
                path=path,
            )
            self.buf += data or b""
        else:
            raise TypeError(f"{path}: no writer for {kafka_type!r}")

    def entity(self, entity: Any, *, header: bool = False) -> None:
        flexible = bool(type(entity).__flexible__)
        tagged: list[tuple[int, dataclasses.Field[Any], Any]] = []
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            tag = get_field_tag(f)
            if tag is not None:
                default = f.default
                if default is dataclasses.MISSING:
                    default = get_tagged_field_default(f)
                if value != default:
                    tagged.append((int(tag), f, value))
                continue
            self.field(type(entity), f, value, flexible, header=header, tagged=False)
        if not flexible:
            return
        name = type(entity).__name__
        self.uvarint(len(tagged), "tags", f"{name} tagged fields")
        for tag, f, value in sorted(tagged, key=lambda t: t[0]):
            self.buf += uvarint(tag)
            inner = _Writer()
            inner.field(type(entity), f, value, True, header=header, tagged=True)
            self.uvarint(len(inner.buf), "tag_size", f"{name}.{f.name} size")
            base = len(self.buf)
            self.sites += [s._replace(pos=s.pos + base) for s in inner.sites]
            self.buf += inner.buf

    def field(
        self,
        owner: type[Any],
        f: dataclasses.Field[Any],
        value: Any,
        flexible: bool,
        *,
        header: bool,
        tagged: bool,
    ) -> None:
        path = f"{owner.__name__}.{f.name}"
        kind = classify_field(f)
        if header and f.name == "client_id":
            self.primitive("legacy_string", value, compact=False, nullable=True, path=path)
        elif isinstance(kind, PrimitiveField):
            nullable = is_optional(f) and not tagged
            kafka_type = get_schema_field_type(f)
            self.primitive(kafka_type, value, compact=flexible, nullable=nullable, path=path)
        elif isinstance(kind, EntityField):
            if is_optional(f) and not tagged:
                self.buf += b"\xff" if value is None else b"\x01"
            if value is not None:
                self.entity(value)
        else:
            self.length(
                None if value is None else len(value),
                compact=flexible,
                legacy="int32",
                role="array",
                nullable=is_optional(f),
                path=path,
            )
            for item in value or ():
                if isinstance(kind, EntityTupleField):
                    self.entity(item)
                else:
                    kafka_type = get_schema_field_type(f)
                    self.primitive(kafka_type, item, compact=flexible, nullable=False, path=path)


def encode(
    body: RequestPayload, correlation_id: int = 1, client_id: str | None = "fuzz"
) -> tuple[bytes, list[Site]]:
    """The request's header and body as kio writes them (no size prefix), and its sites."""
    header_type: Any = body.__header_schema__
    values: dict[str, Any] = {
        "request_api_key": body.__api_key__,
        "request_api_version": body.__version__,
        "correlation_id": correlation_id,
    }
    if "client_id" in {f.name for f in dataclasses.fields(header_type)}:
        values["client_id"] = client_id
    w = _Writer()
    w.entity(header_type(**values), header=True)
    w.entity(body)
    return bytes(w.buf), w.sites
