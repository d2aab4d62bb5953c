"""spark.ranges: micro-batches as acquired ranges, split and carved without decoding records."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")  # importing spark/ loads the data source

from client.records import AcquiredData
from client.records import AcquiredRange
from client.records import Record
from client.records import decode_acquired
from client.records import encode_batch
from spark.ranges import Span
from spark.ranges import batch_bounds
from spark.ranges import carve
from spark.ranges import count
from spark.ranges import shipments
from spark.ranges import spans_of
from spark.ranges import split_spans


def _stored(base: int, n: int) -> bytes:
    """One stored batch of `n` records at offsets base..base+n-1."""
    data = bytearray(encode_batch([Record(b"v%d" % (base + i)) for i in range(n)], 0))
    data[0:8] = base.to_bytes(8, "big")  # the broker assigns the base offset
    return bytes(data)


def _acquired(partition: int, *ranges: tuple[int, int, int], batch: int = 10) -> AcquiredData:
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    data = b"".join(_stored(b, min(batch, hi + 1 - b)) for b in range(lo, hi + 1, batch))
    return AcquiredData("t", partition, tuple(AcquiredRange(*r) for r in ranges), data)


def test_spans_merge_touching_ranges_of_one_delivery_count_only() -> None:
    a = _acquired(0, (0, 9, 1), (10, 19, 1), (20, 29, 2))
    b = _acquired(1, (5, 9, 1))
    assert spans_of([b, a]) == [
        Span("t", 0, 0, 19, 1),
        Span("t", 0, 20, 29, 2),
        Span("t", 1, 5, 9, 1),
    ]
    assert count([a, b]) == 35


def test_split_spans_by_partition_or_into_even_pieces() -> None:
    spans = [Span("t", 0, 0, 99, 1), Span("t", 1, 0, 49, 1)]
    assert split_spans(spans, None) == [[spans[0]], [spans[1]]]
    pieces = split_spans(spans, 3)
    assert [sum(len(s) for s in p) for p in pieces] == [50, 50, 50]
    assert pieces[1] == [Span("t", 0, 50, 99, 1)]
    assert split_spans(spans, 1000)[0] == [Span("t", 0, 0, 0, 1)]  # one offset each at most
    assert split_spans([], 4) == []


def test_shipments_cut_between_stored_batches_and_keep_every_record() -> None:
    acquired = [_acquired(0, (0, 99, 1)), _acquired(1, (3, 47, 2))]
    for pieces in (None, 1, 2, 3, 7):
        tasks = shipments(acquired, pieces)
        if pieces is not None:
            assert len(tasks) <= pieces
        got = sorted(
            (r.partition, r.offset, r.delivery_count)
            for task in tasks
            for ship in task
            for s in ship.spans
            for r in decode_acquired(
                "t", ship.partition, ship.data, [AcquiredRange(s.first, s.last, s.delivery_count)]
            )
        )
        want = [(0, o, 1) for o in range(100)] + [(1, o, 2) for o in range(3, 48)]
        assert got == want, pieces
    bounds = list(batch_bounds(acquired[0].data))
    assert [(b, last) for _, b, last in bounds] == [(b, b + 9) for b in range(0, 100, 10)]


def test_carve_leaves_marked_offsets_alone() -> None:
    span = Span("t", 0, 10, 20, 1)
    assert list(carve(span, {})) == [(10, 20, None)]
    assert list(carve(span, {10: "r", 15: "x", 99: "y"})) == [
        (10, 10, "r"),
        (11, 14, None),
        (15, 15, "x"),
        (16, 20, None),
    ]


def test_the_decoders_arrow_schema_is_the_one_spark_expects() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from client.arrow_batches import SCHEMA as ARROW
    from spark.rows import SCHEMA

    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW)
