"""Every error code a response carries, top-level and per partition, as Kafka's errorCounts().

Kafka's ErrorsPerSec counts each partition's error, not only the response's own: a ShareFetch
whose partitions all fail has no top-level error at all. The walk follows the response's
nested entries (topics, partitions) by their declared types, worked out once per class; record
bytes and entries that cannot hold an error code (acquired ranges, leaders) are never walked.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from typing import Any

from kio.schema.errors import ErrorCode


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    codes: tuple[str, ...]  # fields holding an ErrorCode
    one: tuple[str, ...]  # fields holding one nested entry
    many: tuple[str, ...]  # fields holding a tuple of nested entries


def _entry_type(hint: Any) -> type | None:
    """The dataclass a field holds (alone, optional, or in a tuple); None for primitives."""
    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


_SHAPES: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = _read_shape(cls)
    return shape


def _read_shape(cls: type) -> _Shape:
    hints = typing.get_type_hints(cls)
    codes: list[str] = []
    one: list[str] = []
    many: list[str] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nested = _entry_type(hint)
        if hint is ErrorCode or f.name.endswith("error_code"):
            codes.append(f.name)
        elif nested is not None and _can_fail(nested):
            (many if typing.get_origin(hint) is tuple else one).append(f.name)
    return _Shape(tuple(codes), tuple(one), tuple(many))


def _can_fail(cls: type) -> bool:
    shape = _shape(cls)
    return bool(shape.codes or shape.one or shape.many)


def error_codes(entry: Any) -> Iterator[ErrorCode]:
    """The non-zero error codes in `entry` and everything nested in it."""
    shape = _shape(type(entry))
    for name in shape.codes:
        code = getattr(entry, name)
        if code:
            yield ErrorCode(code)
    for name in shape.one:
        nested = getattr(entry, name)
        if nested is not None:
            yield from error_codes(nested)
    for name in shape.many:
        for nested in getattr(entry, name) or ():
            yield from error_codes(nested)
