"""The share-state control batch as the log appends it (`encode_control_batch`) is byte for byte
the one the generic encoder builds (`build_control_batch` of the record's key and value), and its
header is the one `validate_batches` reads back: the log appends it without parsing it again."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from protocol.record_batch import NO_PRODUCER_EPOCH
from protocol.record_batch import NO_PRODUCER_ID
from protocol.record_batch import build_batch
from protocol.record_batch import build_control_batch
from protocol.record_batch import control_record_key
from protocol.record_batch import validate_batches
from protocol.share_state import SHARE_CHECKPOINT
from protocol.share_state import SHARE_DELTA
from protocol.share_state import ShareCheckpoint
from protocol.share_state import ShareDelta
from protocol.share_state import ShareStateRecord
from protocol.share_state import StateBatch
from protocol.share_state import decode_batch
from protocol.share_state import encode_batch
from protocol.share_state import encode_control_batch
from protocol.share_state import encode_value
from storage import LogConfig
from storage import SegmentLog

TS = 1_764_000_000_000
DATA = build_batch([(b"k", b"v")], timestamp_ms=TS)

I64 = st.integers(-(2**63), 2**63 - 1)
STATES = st.builds(
    StateBatch,
    I64,
    I64,
    st.sampled_from([0, 2, 3, 4]),
    st.integers(-(2**15), 2**15 - 1),
    st.one_of(st.just(0), I64),
)
# Group ids up to ~300 bytes and up to 40 states: values whose length varint takes 1-3 bytes.
GROUPS = st.text(max_size=100)
CHECKPOINTS = st.builds(
    ShareCheckpoint,
    GROUPS,
    st.integers(1, 65535),
    I64,
    I64,
    st.lists(STATES, max_size=40).map(tuple),
)
DELTAS = st.builds(
    ShareDelta, GROUPS, st.integers(1, 65535), I64, st.lists(STATES, max_size=40).map(tuple)
)


def reference_value(record: ShareStateRecord) -> bytes:
    """The value as `encode_value` encoded it before it was made cheaper (kept here verbatim)."""
    group = record.group_id.encode()
    waits = any(s.not_before for s in record.states)
    version = 1 if waits else 0
    head = struct.pack(">h", version) + struct.pack(">h", len(group)) + group
    if isinstance(record, ShareCheckpoint):
        fixed = struct.pack(">Hqq", record.checkpoint_epoch, record.start_offset, record.end_offset)
    else:
        fixed = struct.pack(">Hq", record.checkpoint_epoch, record.back_offset)
    if version == 0:
        packed = (
            struct.pack(">qqbh", s.base_offset, s.last_offset, s.state, s.delivery_count)
            for s in record.states
        )
    else:
        packed = (
            struct.pack(
                ">qqbhq", s.base_offset, s.last_offset, s.state, s.delivery_count, s.not_before
            )
            for s in record.states
        )
    return head + fixed + struct.pack(">i", len(record.states)) + b"".join(packed)


def generic(record: ShareStateRecord, timestamp_ms: int) -> bytes:
    """The batch as the generic record encoder builds it (the encoder used before)."""
    record_type = SHARE_CHECKPOINT if isinstance(record, ShareCheckpoint) else SHARE_DELTA
    return build_control_batch(
        0,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        timestamp_ms,
        [(control_record_key(record_type), reference_value(record))],
    )


@settings(max_examples=300, deadline=None)
@given(st.one_of(CHECKPOINTS, DELTAS), st.integers(0, 2**41))  # kio reads ms as a date
def test_encode_control_batch_is_the_generic_batch(
    record: ShareStateRecord, timestamp_ms: int
) -> None:
    batch, header = encode_control_batch(record, timestamp_ms)
    assert encode_value(record) == reference_value(record)
    assert batch == generic(record, timestamp_ms)
    assert [header] == validate_batches(batch)
    assert encode_batch(record, timestamp_ms) == batch
    assert decode_batch(batch) == [record]


def test_the_steady_rate_checkpoint() -> None:
    """The checkpoint of an emptied window, each ACCEPT's write at a steady rate."""
    record = ShareCheckpoint("bench", 7, 42, 42, ())
    batch, header = encode_control_batch(record, 1_764_000_000_000)
    assert batch == generic(record, 1_764_000_000_000)
    assert [header] == validate_batches(batch)


def test_a_batch_appended_as_built_is_stored_as_a_validated_one(tmp_path: Path) -> None:
    """The log stores a batch appended with its header (no re-parse) exactly as it stores the
    same batch validated: the same segment files, indexes and non-data ranges, across rolls."""
    config = LogConfig(segment_bytes=400, index_interval_bytes=100)
    trusted = SegmentLog.open(tmp_path / "trusted", config)
    checked = SegmentLog.open(tmp_path / "checked", config)
    for i in range(40):
        states = tuple(StateBatch(j, j + i, 0, 1) for j in range(i % 3))
        record = ShareCheckpoint("g", i + 1, i, i, states) if i % 4 else ShareDelta("g", 1, i, ())
        batch, header = encode_control_batch(record, TS + i)
        a = trusted.append_control(batch, now_ms=TS + i, header=header)
        b = checked.append_control(batch, now_ms=TS + i)
        assert a == b
        checked.append(DATA, now_ms=TS + i)
        trusted.append(DATA, now_ms=TS + i)
    assert len(trusted.segments) > 1
    assert trusted.data_records(0, trusted.log_end_offset) == 40
    trusted.close()
    checked.close()
    for path in sorted((tmp_path / "checked").iterdir()):
        assert (tmp_path / "trusted" / path.name).read_bytes() == path.read_bytes(), path.name
