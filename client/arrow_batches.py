"""Fetched record batches straight into Arrow columns, with almost no per-record Python.

A record's length is a varint, so within a batch each record's start depends on the one
before. Many batches are walked in lockstep with numpy (record i of every batch at once); a few
long ones in runs of records of one size, each run found and proven in one numpy step (values
of one size are common, and a batch of them is one or two runs, as the offset delta grows a
byte at record 64), and what is left by a tight Python loop (about 0.2 µs a record). Varints
that fit one or two bytes (nearly all) are read without a loop. Everything else is read for all
records at once with numpy: the k-th byte of every record's next varint is gathered in one
step, and a field rarely needs more than two such steps. Keys, values and headers never become
Python objects: an Arrow binary array whose offsets alternate field start / field end views the
records buffer without a copy, and one `take` of the fields' elements packs them into Arrow's
layout. Measured with `python -m bench --only decode`.

`client.records.decode_acquired` is the one-record-at-a-time reference that this decoder is
tested against (tests/unit/test_arrow_batches.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from client.fetched_batches import FetchedBatch
from client.fetched_batches import corrupt
from client.fetched_batches import fetched_batches
from protocol.record_batch import Buffer
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import read_varint

_HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
# The Arrow form of the Spark Kafka source's schema (spark/rows.py), as Spark converts it.
SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", pa.list_(pa.field("element", _HEADER_TYPE))),
        pa.field("deliveryCount", pa.int32()),
    ]
)
SCHEMA_WITHOUT_HEADERS = SCHEMA.remove(SCHEMA.get_field_index("headers"))
_PADDING = bytes(16)  # after the last record: zeros stop any varint read there, in bounds
_MAX_VARINT = 10
# One lockstep numpy step costs ~15 µs, plain Python ~0.16 µs a record: below this many
# batches, Python is cheaper.
_LOCKSTEP_MIN_BATCHES = 96
# Headers: numpy steps while at least this many records have a j-th header, Python after.
_FEW_RECORDS = 8
# A batch's records are first guessed to be as long as the first one (values of one size are
# common); a guess that holds for fewer than this many records hands the batch to `_chain`.
_STRIDE_MIN_RUN = 64
# Guesses checked in one step: this many, doubled while every guess holds. Bounded so that
# short runs in a long batch cost at most ~16 checks per record, never a pass over the batch.
_STRIDE_WINDOW = 1024

IntArray = Any  # numpy int64 array (numpy's typing of fancy indexing is too loose to help)


def batches_to_arrow(
    data: Buffer,
    *,
    topic: str,
    partition: int,
    first: int = 0,
    last: int = 2**63 - 1,
    delivery_count: int | None = None,
    include_headers: bool = True,
) -> pa.RecordBatch:
    """The records of `data` with offsets in [first, last], as one Arrow record batch.

    `data` is a concatenation of v2 record batches as a Fetch or ShareFetch answer carries them:
    a trailing partial batch is ignored, control batches are skipped, compressed batches are
    decompressed. Columns follow `SCHEMA` (Spark's Kafka source plus `deliveryCount`, which is
    `delivery_count` on every row, or null); `include_headers=False` leaves out the headers
    column, as Spark's `includeHeaders=false` does. Timestamps below 0 (none given) are null.

    :raises KafkaError: CORRUPT_MESSAGE for a batch or record that does not parse or fails its
        CRC; UNSUPPORTED_COMPRESSION_TYPE for an unknown codec.
    """
    return _to_arrow(data, topic, partition, [(first, last, delivery_count)], include_headers)


def acquired_to_arrow(
    data: Buffer,
    *,
    topic: str,
    partition: int,
    acquired: Sequence[tuple[int, int, int]],
    include_headers: bool = True,
) -> pa.RecordBatch:
    """As `batches_to_arrow`, for the records in any of the disjoint `acquired` ranges
    (first offset, last offset, delivery count: a ShareFetch's AcquiredRecords), each row with
    its range's delivery count. One pass over `data` whatever the number of ranges."""
    return _to_arrow(data, topic, partition, acquired, include_headers)


def _to_arrow(
    data: Buffer,
    topic: str,
    partition: int,
    ranges: Sequence[tuple[int, int, int | None]],
    include_headers: bool,
) -> pa.RecordBatch:
    ranges = sorted(ranges, key=lambda r: r[0])
    lo = ranges[0][0] if ranges else 1
    hi = max((r[1] for r in ranges), default=0)
    batches = list(fetched_batches(data, lo, hi))
    buf = b"".join([*(b.records for b in batches), _PADDING])
    arr = np.frombuffer(buf, np.uint8)
    starts, batch_of = _record_starts(buf, arr, batches)
    rec = _Records(buf, arr, starts)
    base_offset = np.array([b.base_offset for b in batches], np.int64)[batch_of]
    offsets = base_offset + rec.offset_delta
    firsts = np.array([r[0] for r in ranges], np.int64)
    lasts = np.array([r[1] for r in ranges], np.int64)
    in_range = np.maximum(np.searchsorted(firsts, offsets, side="right") - 1, 0)
    keep = (offsets >= lo) & (offsets <= lasts[in_range]) if ranges else offsets < 0
    if not keep.all():
        rec.select(keep)
        offsets, batch_of, in_range = offsets[keep], batch_of[keep], in_range[keep]
    n = len(offsets)
    columns = [
        _binary(buf, *rec.key),
        _binary(buf, *rec.value),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        *_timestamps(batches, batch_of, rec.timestamp_delta),
    ]
    if include_headers:
        columns.append(rec.headers.to_arrow(buf))
    if any(r[2] is None for r in ranges):
        columns.append(pa.nulls(n, pa.int32()))
    else:
        counts = np.array([r[2] for r in ranges], np.int32)
        columns.append(pa.array(counts[in_range] if ranges else counts, pa.int32()))
    schema = SCHEMA if include_headers else SCHEMA_WITHOUT_HEADERS
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _record_starts(
    buf: bytes, arr: IntArray, batches: list[FetchedBatch]
) -> tuple[IntArray, IntArray]:
    """Where each record starts in `buf` (the batches' records sections, end to end), and
    the index of its batch.

    Record i+1 starts where record i ends, so within a batch this is a chain. Batches are
    walked in lockstep (record i of every batch at once, with numpy) while enough of them
    have an i-th record; the rest of the longest batches is walked in plain Python."""
    counts = np.array([b.record_count for b in batches], np.int64)
    section_end = np.cumsum([len(b.records) for b in batches], dtype=np.int64)
    pos = section_end - [len(b.records) for b in batches]
    first_index = np.cumsum(counts) - counts  # of each batch's first record in `starts`
    starts = np.empty(int(counts.sum()), np.int64)
    i = 0
    here: IntArray = pos
    end, index, left, active = section_end, first_index, counts, np.arange(len(batches))
    while len(here) >= _LOCKSTEP_MIN_BATCHES:
        starts[index] = here
        here = here + _record_sizes(arr, here)
        if (here > end).any():
            raise corrupt("a record runs past its batch")
        index, left = index + 1, left - 1
        if not left.all():
            pos[active] = here
            active, here, end, index, left = (x[left > 0] for x in (active, here, end, index, left))
        i += 1
    pos[active] = here
    for b, stop in zip(active.tolist(), end.tolist(), strict=True):
        first, last = int(first_index[b]) + i, int(first_index[b] + counts[b])
        pos[b] = _walk(buf, arr, int(pos[b]), stop, starts[first:last])
    if (pos != section_end).any() or (len(starts) and starts.min() < 0):
        raise corrupt("records do not fill their batch")
    return starts, np.repeat(np.arange(len(batches), dtype=np.int64), counts)


def _record_sizes(arr: IntArray, pos: IntArray) -> IntArray:
    """The size (length varint included) of the record at each of `pos`, usually from the
    one or two bytes of its length."""
    b0 = arr[pos].astype(np.int64)
    b1 = arr[pos + 1].astype(np.int64)
    two = b0 >= 0x80
    size: IntArray
    if (two & (b1 >= 0x80)).any():
        length, body = _varints(arr, pos)
        size = body - pos + length
    else:
        zigzag = np.where(two, (b0 & 0x7F) | (b1 << 7), b0)
        size = 1 + two + ((zigzag >> 1) ^ -(zigzag & 1))
    if (size < 2).any():  # a length below 1 (_Records would refuse it too)
        raise corrupt("record of length below 1")
    return size


def _walk(buf: bytes, arr: IntArray, pos: int, end: int, out: IntArray) -> int:
    """Write the starts of `len(out)` records from `pos` on into `out`; where the last ends.

    Runs of records of one size are found with numpy: guess that the next records (a window of
    them) are as long as the one at `pos`, read the length at every guessed start at once, keep
    the guesses up to the first that disagrees (each kept guess is proven by the one before it:
    a record of that size ends where the next guess starts). A run shorter than
    `_STRIDE_MIN_RUN` records leaves the rest to `_chain`, so mixed sizes cost one numpy step
    of at most `_STRIDE_WINDOW` guesses more than before."""
    done, count, window = 0, len(out), _STRIDE_WINDOW
    while done < count:
        b0, b1 = buf[pos], buf[pos + 1]  # in bounds: `buf` ends with _PADDING
        if b0 >= 0x80 and b1 >= 0x80:  # a long record (>= 8 KiB): few per batch
            break
        zigzag = b0 if b0 < 0x80 else (b0 & 0x7F) | (b1 << 7)
        size = 1 + (b0 >= 0x80) + ((zigzag >> 1) ^ -(zigzag & 1))
        if size < 2 or pos + size > end:  # damaged: `_chain` says how
            break
        n = min(count - done, (end - pos) // size, window)
        guesses = pos + size * np.arange(n, dtype=np.int64)
        wrong = np.flatnonzero(_short_sizes(arr, guesses) != size)
        run = int(wrong[0]) if len(wrong) else n
        out[done : done + run] = guesses[:run]
        done, pos = done + run, pos + run * size
        if run < _STRIDE_MIN_RUN:
            break
        window = 2 * window if run == n else _STRIDE_WINDOW
    if done == count:
        return pos
    rest = _chain(buf, pos, count - done)
    pos = rest.pop()
    out[done:] = rest
    return pos


def _short_sizes(arr: IntArray, pos: IntArray) -> IntArray:
    """The size (length varint included) of a record at each of `pos` whose length takes one
    or two bytes; -1 where it takes more. Never raises: the positions may be guesses."""
    b0 = arr[pos].astype(np.int64)
    b1 = arr[pos + 1].astype(np.int64)
    two = b0 >= 0x80
    zigzag = np.where(two, (b0 & 0x7F) | (b1 << 7), b0)
    size: IntArray = 1 + two + ((zigzag >> 1) ^ -(zigzag & 1))
    size[two & (b1 >= 0x80)] = -1
    return size


def _chain(buf: bytes, pos: int, count: int) -> list[int]:
    """The starts of `count` records from `pos` on, then the end of the last one: the only
    per-record Python loop (about 0.2 µs a record; lengths are mostly 1 or 2 bytes)."""
    starts: list[int] = []
    add = starts.append
    try:
        for _ in range(count):
            add(pos)
            b = buf[pos]
            if b < 0x80:
                pos += 1 + ((b >> 1) ^ -(b & 1))
            elif buf[pos + 1] < 0x80:
                b = (b & 0x7F) | buf[pos + 1] << 7
                pos += 2 + ((b >> 1) ^ -(b & 1))
            else:
                length, pos = read_varint(buf, pos)
                pos += length
    except (IndexError, InvalidRecordBatch) as e:
        raise corrupt(f"record at {pos}: {e}") from e
    if not 0 <= pos <= len(buf):  # a damaged length far out (it would not fit an int64)
        raise corrupt(f"a record length runs to {pos}, outside the batch")
    # A length that runs into the next batch (or backwards: _Records refuses lengths below
    # 1) cannot end exactly at this batch's end, which the caller checks.
    add(pos)
    return starts


def _varints(arr: IntArray, pos: IntArray) -> tuple[IntArray, IntArray]:
    """The zigzag varint at each position of `pos`, and the position after each."""
    b = arr[pos]
    two = b >= 0x80
    if not two.any():  # all one byte (small deltas, short keys, header counts)
        small = b.astype(np.int64)
        return (small >> 1) ^ -(small & 1), pos + 1
    b1 = arr[pos + 1]
    if not (b1[two] >= 0x80).any():  # one or two bytes (lengths below 8 KiB)
        small = np.where(two, (b & 0x7F) | (b1.astype(np.int64) << 7), b)
        return (small >> 1) ^ -(small & 1), pos + 1 + two
    value = (b & 0x7F).astype(np.uint64)
    after = pos + 1
    more = np.flatnonzero(b & 0x80)
    for k in range(1, _MAX_VARINT):
        if not len(more):
            break
        b = arr[pos[more] + k]
        value[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        after[more] += 1
        more = more[(b & 0x80) != 0]
    if len(more):
        raise corrupt("varint longer than 10 bytes")
    signed = (value >> np.uint64(1)) ^ (np.uint64(0) - (value & np.uint64(1)))
    return signed.view(np.int64), after


class _Records:
    """Every record's fields as (start, length; -1 for null) arrays, all checked to lie
    within their record (as the reference does, records outside the window included)."""

    def __init__(self, buf: bytes, arr: IntArray, starts: IntArray) -> None:
        self.buf, self.arr = buf, arr
        length, body = _varints(arr, starts)
        if len(length) and length.min() < 1:
            raise corrupt("record of length below 1")
        self.end = body + length
        self.timestamp_delta, pos = _varints(arr, body + 1)  # after the attributes byte
        self.offset_delta, self.pos = _varints(arr, pos)
        self.key = self.field()
        self.value = self.field()
        count, self.pos = _varints(arr, self.pos)
        if (count < 0).any() or (count > self.end - self.pos).any():
            raise corrupt("record header count out of range")
        self.headers = _Headers.read(self, count)
        if (self.pos != self.end).any():
            raise corrupt("a record's fields do not end where the record does")

    def field(self, where: IntArray | None = None) -> tuple[IntArray, IntArray]:
        """The next bytes field of each record (or of the records `where` selects), moving
        past it. A negative length is null, as Kafka's DefaultRecord reads it."""
        pos = self.pos if where is None else self.pos[where]
        length, start = _varints(self.arr, pos)
        after = start + np.maximum(length, 0)
        if (after > (self.end if where is None else self.end[where])).any():
            raise corrupt("a key, value or header runs past its record")
        if where is None:
            self.pos = after
        else:
            self.pos[where] = after
        return start, length

    def select(self, keep: IntArray) -> None:
        self.timestamp_delta = self.timestamp_delta[keep]
        self.key = (self.key[0][keep], self.key[1][keep])
        self.value = (self.value[0][keep], self.value[1][keep])
        self.headers.select(keep)


class _Headers:
    """Headers of all records flattened in record order, as (start, length) of keys/values."""

    def __init__(self, count: IntArray, fields: list[IntArray]) -> None:
        self.count = count
        self.fields = fields  # key start, key length, value start, value length

    @classmethod
    def read(cls, records: _Records, count: IntArray) -> _Headers:
        list_start = np.concatenate(([0], np.cumsum(count)))
        fields = [np.zeros(int(list_start[-1]), np.int64) for _ in range(4)]
        j = 0
        where = np.flatnonzero(count)
        while len(where) >= _FEW_RECORDS:
            flat = list_start[where] + j
            fields[0][flat], fields[1][flat] = records.field(where)
            fields[2][flat], fields[3][flat] = records.field(where)
            j += 1
            where = where[count[where] > j]
        for r in where.tolist():  # a few records with many headers: one numpy step costs more
            first, stop = int(list_start[r]) + j, int(list_start[r + 1])
            records.pos[r] = _fields(records.buf, int(records.pos[r]), int(records.end[r]),
                                     [f[first:stop] for f in fields])  # fmt: skip
        return cls(count, fields)

    def select(self, keep: IntArray) -> None:
        flat_keep = np.repeat(keep, self.count)
        self.count = self.count[keep]
        self.fields = [f[flat_keep] for f in self.fields]

    def to_arrow(self, buf: bytes) -> pa.Array:
        key_start, key_len, value_start, value_len = self.fields
        keys = _binary(buf, key_start, np.maximum(key_len, 0))  # a null key is ""
        try:
            keys = keys.cast(pa.string())
        except pa.ArrowInvalid:  # not UTF-8: decode as the reference does
            keys = pa.array([k.decode("utf-8", "replace") for k in keys.to_pylist()], pa.string())
        values = _binary(buf, value_start, value_len)
        entries = pa.StructArray.from_arrays([keys, values], fields=list(_HEADER_TYPE))
        list_offsets = np.concatenate(([0], np.cumsum(self.count))).astype(np.int32)
        return pa.ListArray.from_arrays(
            pa.array(list_offsets), entries, type=SCHEMA.field("headers").type
        )


def _fields(buf: bytes, pos: int, end: int, out: list[IntArray]) -> int:
    """Read (key, value) header pairs from `pos` into `out` (key start, key length, value
    start, value length; views into the flattened arrays), one at a time; where they end."""
    try:
        for i in range(len(out[0])):
            for f in (0, 2):
                length, start = read_varint(buf, pos)
                pos = start + max(length, 0)
                if pos > end:
                    raise corrupt("a header runs past its record")
                out[f][i], out[f + 1][i] = start, length
    except (IndexError, OverflowError, InvalidRecordBatch) as e:  # Overflow: a damaged
        # length below int64's range (one above it runs past the record first)
        raise corrupt(f"record header at {pos}: {e}") from e
    return pos


def _binary(buf: bytes, start: IntArray, length: IntArray) -> pa.Array:
    """Binary fields given by (start, length; -1 null) in `buf`, packed into one Arrow array.

    Offsets 0, start0, end0, start1, end1, ... make a zero-copy array over `buf` whose odd
    elements are the fields (the even ones the bytes before each); `take` packs the odd ones."""
    n = len(start)
    valid = length >= 0
    if not valid.any():  # keyless records: nothing to pack
        return pa.nulls(n, pa.binary())
    bounds = np.zeros(2 * n + 1, np.int64)
    bounds[1::2] = start
    bounds[2::2] = start + np.maximum(length, 0)
    view = pa.Array.from_buffers(
        pa.large_binary(), 2 * n, [None, pa.py_buffer(bounds), pa.py_buffer(buf)]
    )
    packed = view.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64))).cast(pa.binary())
    if valid.all():
        return packed
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, *packed.buffers()[1:]], null_count=int(n - valid.sum())
    )


def _timestamps(
    batches: list[FetchedBatch], batch_of: IntArray, delta: IntArray
) -> tuple[pa.Array, pa.Array]:
    """The timestamp column (null below 0) and the timestampType column."""
    base = np.array([b.base_timestamp for b in batches], np.int64)[batch_of]
    max_ts = np.array([b.max_timestamp for b in batches], np.int64)[batch_of]
    log_append = np.array([b.log_append_time for b in batches], np.bool_)[batch_of]
    ms = np.where(log_append, max_ts, base + delta)
    micros = pa.array(ms * 1000, pa.int64(), mask=ms < 0)
    return micros.cast(SCHEMA.field("timestamp").type), pa.array(log_append.astype(np.int32))
