"""A large request body decoded element by element, so that the thread decoding it lets the
event loop run.

kio's native reader decodes a whole array in one call and keeps the GIL meanwhile: a
ShareFetch naming a million partitions held it for two seconds, and the event loop with it,
although the frame was decoded in a worker thread. Here the arrays are walked from Python, one
kio call per element (an entity without arrays inside is read whole by kio's reader, as it
would have been), so the thread hands the GIL over at the interpreter's switch interval
(5 ms). The result is the object kio's reader makes of the same bytes, and bytes it refuses are
refused here too (tested against it for every request schema the broker serves).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from kio._kio_native import entity_reader
from kio._kio_native import get_field_reader
from kio._kio_native import get_reader
from kio._kio_native import read_compact_array_length
from kio._kio_native import read_legacy_array_length
from kio._kio_native import read_unsigned_varint
from kio.serial._introspect import EntityTupleField
from kio.serial._introspect import PrimitiveTupleField
from kio.serial._introspect import classify_field
from kio.serial._introspect import get_field_tag

# kio's convention: a reader takes a buffer and an offset, and returns the value read and the
# number of bytes it took.
Reader = Callable[[Any, int], tuple[Any, int]]


def _nullable(hint: Any) -> bool:
    return typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in (
        typing.get_args(hint)
    )


def _array_reader(item: Reader, flexible: bool) -> Reader:
    """An array read one item per call of `item`, from Python."""
    read_length = read_compact_array_length if flexible else read_legacy_array_length

    def read(buf: Any, offset: int) -> tuple[Any, int]:
        length, size = read_length(buf, offset)
        pos = offset + size
        if length is None or length == -1:  # null (kio reads it so whether or not it may be)
            return None, pos - offset
        if length < 0:
            raise ValueError(f"array length {length}")
        items: list[Any] = []
        append = items.append
        for _ in range(length):
            value, size = item(buf, pos)
            pos += size
            append(value)
        return tuple(items), pos - offset

    return read


def _has_arrays(entity: type[Any]) -> bool:
    return any(
        isinstance(classify_field(f), EntityTupleField | PrimitiveTupleField)
        for f in dataclasses.fields(entity)
    )


@cache
def reader(entity: type[Any]) -> Reader:
    """The reader of `entity`: kio's own for one without arrays, else a field-by-field one
    whose arrays are read an element at a time."""
    if not _has_arrays(entity):
        return entity_reader(entity)
    flexible = bool(entity.__flexible__)
    hints = typing.get_type_hints(entity)
    plain: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    for f in dataclasses.fields(entity):
        tag = get_field_tag(f)
        if tag is not None:
            tagged[tag] = (f.name, get_field_reader(entity, f, False, True))
            continue
        kind = classify_field(f)
        read: Reader
        if isinstance(kind, EntityTupleField):
            read = _array_reader(reader(kind.type_), flexible)
        elif isinstance(kind, PrimitiveTupleField):
            item_hint = typing.get_args(_without_none(hints[f.name]))[0]
            item = get_reader(f.metadata["kafka_type"], flexible, _nullable(item_hint))
            read = _array_reader(item, flexible)
        else:
            read = get_field_reader(entity, f, False, False)
        plain.append((f.name, read))
    return _entity_reader(entity, plain, tagged if flexible else None)


def _without_none(hint: Any) -> Any:
    if not _nullable(hint):
        return hint
    return next(a for a in typing.get_args(hint) if a is not type(None))


def _entity_reader(
    entity: type[Any], plain: list[tuple[str, Reader]], tagged: dict[int, tuple[str, Reader]] | None
) -> Reader:
    def read(buf: Any, offset: int) -> tuple[Any, int]:
        values = {}
        pos = offset
        for name, read_field in plain:
            values[name], size = read_field(buf, pos)
            pos += size
        if tagged is not None:
            count, size = read_unsigned_varint(buf, pos)
            pos += size
            for _ in range(count):
                tag, size = read_unsigned_varint(buf, pos)
                pos += size
                length, size = read_unsigned_varint(buf, pos)
                pos += size
                if tag not in tagged:  # as kio's reader: an unknown tag does not parse
                    raise KeyError(f"Unknown tagged field tag: {tag}")
                name, read_field = tagged[tag]
                values[name], _ = read_field(buf, pos)
                pos += length
        return entity(**values), pos - offset

    return read
