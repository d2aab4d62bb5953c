"""The share groups a coordinator records in its `__consumer_offsets` (`--processes N`), and
their replay beside the committed offsets after a restart (`coordinator/share_group_records.py`).

Kafka's schemas (`group-coordinator/src/main/resources/common/message/ShareGroupMetadataKey.json`
and `ShareGroupMetadataValue.json`): the key is version 11 then the group id, the value version
0 (flexible) with the group epoch and the metadata hash; a tombstone deletes the group.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.offset_store import OFFSETS_LOG_CONFIGS
from coordinator.offset_store import OffsetStore
from coordinator.share_group_records import ShareGroupRecords
from coordinator.share_group_records import known_share_groups
from protocol.consumer_offsets import OffsetValue
from protocol.consumer_offsets import decode_key as decode_offset_key
from protocol.share_group_metadata import InvalidShareGroupRecord
from protocol.share_group_metadata import decode_key
from protocol.share_group_metadata import encode_key
from protocol.share_group_metadata import encode_value
from storage.log_manager import LogManager
from storage.topics import CONSUMER_OFFSETS


def now() -> int:
    return 1_000


def mine(group_id: str) -> bool:
    return not group_id.startswith("theirs")


def open_records(data: Path) -> tuple[LogManager, ShareGroupRecords, OffsetStore]:
    logs = LogManager(data)
    log = logs.internal_log(CONSUMER_OFFSETS, OFFSETS_LOG_CONFIGS)
    records = ShareGroupRecords(log, now, mine)
    return logs, records, OffsetStore.open(logs, now, records.replay)


def test_kafkas_record_layout() -> None:
    assert encode_key("sg") == b"\x00\x0b\x00\x02sg"  # ShareGroupMetadataKey: version 11
    # ShareGroupMetadataValue v0: version, epoch int32, metadata hash int64, no tagged fields.
    assert encode_value(3) == b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00" * 8 + b"\x00"
    assert decode_key(encode_key("sg")) == "sg"
    assert decode_key(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03") is None  # an offset's
    assert decode_offset_key(encode_key("sg")) is None  # not an offset to the offsets' reader
    with pytest.raises(InvalidShareGroupRecord):
        decode_key(b"\x00\x0b\x00\x09sg")


def test_groups_recorded_and_deleted_are_known_after_a_restart(tmp_path: Path) -> None:
    logs, records, store = open_records(tmp_path)
    records.record("kept", 1)
    records.record("kept", 2)  # recorded already: nothing written
    records.record("deleted", 1)
    store.commit("g", {("t", 0): OffsetValue(5)})
    records.forget("deleted")
    records.forget("never")  # never recorded: nothing written
    end = logs.internal_log(CONSUMER_OFFSETS, OFFSETS_LOG_CONFIGS).log_end_offset
    assert end == 4
    assert records.groups() == {"kept"}
    logs.close()

    logs, records, store = open_records(tmp_path)
    assert records.groups() == {"kept"}
    assert store.group_offsets("g") == {("t", 0): OffsetValue(5)}
    assert store.groups() == {"g"}  # a share group is no consumer group's offsets
    logs.close()


def test_a_record_of_a_group_another_process_coordinates_is_left_at_replay(
    tmp_path: Path,
) -> None:
    """N changed: the group's coordinator is another process now; it is not known here."""
    logs, records, _ = open_records(tmp_path)
    log = logs.internal_log(CONSUMER_OFFSETS, OFFSETS_LOG_CONFIGS)
    ShareGroupRecords(log, now, lambda g: True).record("theirs-1", 1)
    records.record("mine-1", 1)
    records.record("theirs-2", 1)  # sent to the wrong node: not this one's to record
    assert records.groups() == {"mine-1"}
    logs.close()
    _, records, _ = open_records(tmp_path)
    assert records.groups() == {"mine-1"}


def test_nothing_is_recorded_with_one_process(tmp_path: Path) -> None:
    """N = 1: every share-partition is local; the groups with state are the known ones."""
    logs = LogManager(tmp_path)
    log = logs.internal_log(CONSUMER_OFFSETS, OFFSETS_LOG_CONFIGS)
    records = ShareGroupRecords(log, now, None)
    records.record("g", 1)
    assert log.log_end_offset == 0 and records.groups() == set()
    known = known_share_groups(records, lambda: {"with-state"}, single=True)
    assert set(known()) == {"with-state"}
    several = known_share_groups(records, lambda: {"with-state"}, single=False)
    assert set(several()) == set()
