"""The walk over a ShareFetch read's spans that key ordering (`key_hashes.py`) and scheduled
delivery (`deliver_at.py`) share: data batches are decoded, control and empty ones skipped,
a damaged one left out with one log line naming it."""

from __future__ import annotations

from structlog.testing import capture_logs

from broker.share.span_records import span_records
from protocol.record_batch import build_batch
from protocol.records import record_keys
from storage.log import BatchSpan


def test_data_batches_are_decoded_and_the_rest_skipped_or_logged() -> None:
    first = build_batch([(b"a", b"1"), (None, b"2")], timestamp_ms=1, base_offset=0)
    control = build_batch([(b"c", b"x")], timestamp_ms=1, base_offset=2)  # read as control
    damaged = bytearray(build_batch([(b"d", b"x" * 10)], timestamp_ms=1, base_offset=3))
    damaged[61] = 0x7E  # the record's length: 63 bytes, past the batch's end
    empty = build_batch([(b"e", b"x")], timestamp_ms=1, base_offset=4)  # read as empty
    last = build_batch([(b"f", b"1")], timestamp_ms=1, base_offset=5)
    spans, data = [], b""
    for batch, control_, records in [(first, False, True), (control, True, True),
                                     (damaged, False, True), (empty, False, False),
                                     (last, False, True)]:  # fmt: skip
        offset = len(spans) and spans[-1].last_offset + 1
        last_offset = offset + (1 if batch is first else 0)
        spans.append(BatchSpan(offset, last_offset, len(data), len(batch), control_, records))
        data += bytes(batch)
    with capture_logs() as logs:
        got = list(span_records(data, spans, record_keys, "unreadable", group="G"))
    assert got == [(0, b"a"), (1, None), (5, b"f")]
    assert [(e["event"], e["group"], e["base_offset"]) for e in logs] == [("unreadable", "G", 3)]
    assert logs[0]["error"].startswith("length")
