"""protocol.records' one walk over a batch's records and its three views (record_keys,
header_values, null_key_indexes), over varints of one byte (read inline) and of more
(offset deltas from 64 on, keys of 64 bytes and more, timestamps far apart), uncompressed
and compressed, and over records that run past their batch."""

from __future__ import annotations

import pytest

from protocol.record_batch import Compression
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.records import StoredBatch
from protocol.records import build_stored_batch
from protocol.records import decode_records
from protocol.records import encode_run
from protocol.records import header_values
from protocol.records import null_key_indexes
from protocol.records import record_keys

BASE = 1_000


def _key(i: int) -> bytes | None:
    return None if i % 7 == 3 else b"k" * (i % 150)


def _records() -> list[NewRecord]:
    return [
        NewRecord(_key(i), b"v" * (i % 90), [(b"h", b"%d" % i)] if i % 5 else [],
                  timestamp_ms=1_700_000_000_000 + (i % 3) * 40_000 * i)
        for i in range(300)
    ]  # fmt: skip


def _batch(codec: Compression) -> bytes:
    batch = build_batch(_records(), timestamp_ms=1_700_000_000_000, base_offset=BASE)
    if codec == Compression.NONE:
        return batch
    header, records = decode_records(batch)
    fields = StoredBatch(
        base_offset=BASE, last_offset=BASE + len(records) - 1, attributes=codec,
        base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=len(records),
    )  # fmt: skip
    return build_stored_batch(fields, encode_run(records, 0))


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_views_of_one_and_many_byte_varints(codec: Compression) -> None:
    batch = _batch(codec)
    assert record_keys(batch) == [(BASE + i, _key(i)) for i in range(300)]
    assert null_key_indexes(batch) == [i for i in range(300) if i % 7 == 3]
    assert header_values(batch, b"h") == [(BASE + i, b"%d" % i) for i in range(300) if i % 5]


def test_a_record_past_its_batch_is_refused_by_every_view() -> None:
    batch = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=1))
    batch[61] = 0x7E  # the first record's length: 63 bytes, past the batch's end
    for view in (record_keys, null_key_indexes, lambda b: header_values(b, b"h")):
        with pytest.raises(InvalidRecordBatch):
            view(bytes(batch))
    cut = build_batch([(b"a", b"1")], timestamp_ms=1)[:-3]  # its last bytes missing
    for view in (record_keys, null_key_indexes, lambda b: header_values(b, b"h")):
        with pytest.raises(InvalidRecordBatch):
            view(cut)
