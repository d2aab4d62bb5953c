"""Micro-batches as acquired ranges: what the driver keeps, splits and acknowledges.

The driver never decodes a record (see `spark.stream`): a micro-batch is the list of
`AcquiredData` its ShareFetches brought, and from those only the ranges
`(topic, partition, first, last, delivery count)` matter to planning, splitting and
acknowledging. Everything here costs per range or per stored batch header, never per record.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from client.records import AcquiredData

# baseOffset (q), batchLength (i), partitionLeaderEpoch (i), magic (b), crc (I),
# attributes (h), lastOffsetDelta (i): enough of a v2 batch header to know its offsets.
_HEAD = struct.Struct(">qiibIhi")
_LOG_OVERHEAD = 12
T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class Span:
    """Offsets `first..last` of one partition, acquired with one delivery count."""

    topic: str
    partition: int
    first: int
    last: int
    delivery_count: int

    def __len__(self) -> int:
        return self.last - self.first + 1


def spans_of(acquired: Iterable[AcquiredData]) -> list[Span]:
    """The acquired ranges, sorted, with touching ranges of one delivery count merged."""
    raw = sorted(
        Span(a.topic, a.partition, r.first_offset, r.last_offset, r.delivery_count)
        for a in acquired
        for r in a.ranges
    )
    out: list[Span] = []
    for s in raw:
        prev = out[-1] if out else None
        if (
            prev is not None
            and (prev.topic, prev.partition, prev.delivery_count)
            == (s.topic, s.partition, s.delivery_count)
            and prev.last + 1 == s.first
        ):
            out[-1] = Span(s.topic, s.partition, prev.first, s.last, s.delivery_count)
        else:
            out.append(s)
    return out


def count(acquired: Iterable[AcquiredData]) -> int:
    """Acquired offsets (records, unless the log has gaps inside a range)."""
    return sum(r.last_offset - r.first_offset + 1 for a in acquired for r in a.ranges)


def split_spans(spans: list[Span], pieces: int | None) -> list[list[Span]]:
    """One piece per partition (`pieces=None`), or `pieces` pieces (fewer only when there are
    fewer offsets) of as many offsets give or take one, cutting a span where a piece fills up."""
    if pieces is None:
        by_tp: dict[tuple[str, int], list[Span]] = {}
        for s in spans:
            by_tp.setdefault((s.topic, s.partition), []).append(s)
        return list(by_tp.values())
    total = sum(len(s) for s in spans)
    if total == 0:
        return []
    n = min(pieces, total)
    base, extra = divmod(total, n)  # n pieces exactly: the first `extra` hold one more
    out: list[list[Span]] = [[]]
    room = base + (1 if extra else 0)
    for s in spans:
        first = s.first
        while first <= s.last:
            if room == 0:
                out.append([])
                room = base + (1 if len(out) <= extra else 0)
            last = min(s.last, first + room - 1)
            out[-1].append(Span(s.topic, s.partition, first, last, s.delivery_count))
            room -= last - first + 1
            first = last + 1
    return out


def batch_bounds(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(end position, base offset, last offset) of each whole stored batch in `data`."""
    pos = 0
    while pos + _HEAD.size <= len(data):
        base, length, _, _, _, _, last_delta = _HEAD.unpack_from(data, pos)
        end = pos + _LOG_OVERHEAD + length
        if end > len(data):
            return
        yield end, base, base + last_delta
        pos = end


@dataclass(frozen=True, slots=True)
class Shipment:
    """Stored batches of one partition and the spans to read from them: what a task decodes
    when the driver ships the bytes it already has."""

    topic: str
    partition: int
    data: bytes
    spans: tuple[Span, ...]


def shipments(acquired: Iterable[AcquiredData], pieces: int | None) -> list[list[Shipment]]:
    """The batches grouped into tasks: one per partition (`pieces=None`) or `pieces` of about
    as many bytes, cutting the bytes only between stored batches."""
    units: list[Shipment] = []
    for a in acquired:
        spans = tuple(spans_of([a]))
        if spans:
            units.append(Shipment(a.topic, a.partition, a.data, spans))
    if pieces is None:
        by_tp: dict[tuple[str, int], list[Shipment]] = {}
        for u in units:
            by_tp.setdefault((u.topic, u.partition), []).append(u)
        return list(by_tp.values())
    total = sum(len(u.data) for u in units)
    if total == 0:
        return []
    size = max(1, -(-total // pieces))
    out: list[list[Shipment]] = [[]]
    room = size
    for u in units:
        for cut in _cut(u, room, size):
            if room <= 0:
                out.append([])
                room = size
            out[-1].append(cut)
            room -= len(cut.data)
    return [p for p in out if p]


def _cut(u: Shipment, room: int, size: int) -> Iterator[Shipment]:
    """`u` in pieces that fill the current task's `room` and then `size` bytes each."""
    start = 0
    first = u.spans[0].first
    limit = room if room > 0 else size
    for end, _base, last in batch_bounds(u.data):
        if end - start >= limit:
            yield _piece(u, start, end, first, last)
            start, first, limit = end, last + 1, size
    if start < len(u.data):
        yield _piece(u, start, len(u.data), first, u.spans[-1].last)


def _piece(u: Shipment, start: int, end: int, first: int, last: int) -> Shipment:
    spans = tuple(
        Span(s.topic, s.partition, max(s.first, first), min(s.last, last), s.delivery_count)
        for s in u.spans
        if s.last >= first and s.first <= last
    )
    return Shipment(u.topic, u.partition, u.data[start:end], spans)


def carve(span: Span, marked: dict[int, T]) -> Iterator[tuple[int, int, T | None]]:
    """`span` as (first, last, verdict) runs: the marked offsets alone with their verdict,
    the rest in runs with None."""
    first = span.first
    for offset in sorted(o for o in marked if span.first <= o <= span.last):
        if offset > first:
            yield first, offset - 1, None
        yield offset, offset, marked[offset]
        first = offset + 1
    if first <= span.last:
        yield first, span.last, None


def tasks_for(kafka_partitions: int, exactly: int | None, at_least: int | None) -> int | None:
    """Spark tasks for a read of `kafka_partitions`: `numPartitions` when given, else one per
    Kafka partition (None), or `minPartitions` when that is more (Spark's Kafka source then
    cuts partitions in pieces)."""
    if exactly is not None:
        return exactly
    if at_least is not None and at_least > kafka_partitions:
        return at_least
    return None
