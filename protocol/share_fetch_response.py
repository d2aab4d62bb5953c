"""ShareFetchResponse v1-v2 written straight from plain values: the hot path's own serialiser.

A share consumer at the tail gets one small answer per fetch, and kio's generic writer (with
the typed dataclasses it writes from) cost more than acquiring the records. kio stays the
source of truth: `tests/unit/test_share_fetch_response.py` checks these bytes against kio's
writer for both versions on Hypothesis-generated answers.

Layout (ShareFetchResponse.json, flexible in every version; v2 is v1's layout):
throttle_time_ms int32, error_code int16, error_message, acquisition_lock_timeout_ms int32,
responses [topic_id uuid, partitions [partition_index int32, error_code int16, error_message,
acknowledge_error_code int16, acknowledge_error_message, current_leader {leader_id int32,
leader_epoch int32}, records (compact bytes), acquired_records [first_offset int64,
last_offset int64, delivery_count int16]]], node_endpoints [] (always empty here: Shoal leads
every partition it serves). Every struct ends with an empty tagged-field section.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from protocol.wire import NO_TAGGED_FIELDS
from protocol.wire import array_length
from protocol.wire import nullable_string
from protocol.wire import uvarint

VERSIONS = (1, 2)

# The response up to its topics' count, in one pack when there is no error message and fewer
# than 127 topics (a one-byte compact count): throttle time, error code, a null error message,
# acquisition lock timeout, the count.
_HEAD = struct.Struct(">ihbiB")
_TOP = struct.Struct(">ih")  # throttle time, error code
_LOCK_TIMEOUT = struct.Struct(">i")
# A partition up to its records, in one pack when there is no acknowledgement error message:
# partition index, error code, a null error message, acknowledgement error code, a null
# message, leader id, leader epoch, the leader's empty tagged fields (six appends before).
_PARTITION_HEAD = struct.Struct(">ihbhbiib")
_PARTITION = struct.Struct(">ih")  # partition index, error code
_ACK_CODE = struct.Struct(">h")
_LEADER = struct.Struct(">iib")  # leader id, leader epoch, its empty tagged fields
_ACQUIRED = struct.Struct(">qqhb")  # first, last, delivery count, empty tagged fields
_TAIL = b"\x01\x00"  # no node endpoints, the response's empty tagged fields


class AcquiredRange(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class PartitionAnswer(NamedTuple):
    """One partition of a ShareFetch answer: its errors, the stored batches and the ranges
    acquired in them."""

    partition: int
    error_code: int
    acknowledge_error_code: int
    acknowledge_error_message: str | None
    leader_id: int
    leader_epoch: int
    records: bytes
    # (first offset, last offset, delivery count) each: AcquiredRange, or any such tuple (the
    # share window's own AcquiredRecords, written as they are, with no copy).
    acquired: Sequence[tuple[int, int, int]]


TopicAnswers = tuple[uuid.UUID, Sequence[PartitionAnswer]]


def encode_share_fetch_response(
    version: int,
    topics: Sequence[TopicAnswers],
    *,
    lock_timeout_ms: int,
    error_code: int = 0,
    error_message: str | None = None,
    throttle_time_ms: int = 0,
) -> bytes:
    """The response body (no header) for a request of `version`."""
    if version not in VERSIONS:
        raise ValueError(f"ShareFetchResponse v{version} is not served by this encoder")
    if error_message is None and len(topics) < 0x7F:
        out = [_HEAD.pack(throttle_time_ms, error_code, 0, lock_timeout_ms, len(topics) + 1)]
    else:
        out = [
            _TOP.pack(throttle_time_ms, error_code),
            nullable_string(error_message, True),
            _LOCK_TIMEOUT.pack(lock_timeout_ms),
            array_length(len(topics), True),
        ]
    append = out.append
    for topic_id, partitions in topics:
        append(topic_id.bytes)
        append(array_length(len(partitions), True))
        for p in partitions:
            if p.acknowledge_error_message is None:
                append(_PARTITION_HEAD.pack(p.partition, p.error_code, 0,
                                            p.acknowledge_error_code, 0, p.leader_id,
                                            p.leader_epoch, 0))  # fmt: skip
            else:
                append(_PARTITION.pack(p.partition, p.error_code))
                append(b"\x00")  # error_message: null
                append(_ACK_CODE.pack(p.acknowledge_error_code))
                append(nullable_string(p.acknowledge_error_message, True))
                append(_LEADER.pack(p.leader_id, p.leader_epoch, 0))
            append(uvarint(len(p.records) + 1))
            append(p.records)
            acquired = p.acquired
            append(array_length(len(acquired), True))
            for a in acquired:  # a range each (a batch at most), never a record each
                append(_ACQUIRED.pack(a[0], a[1], a[2], 0))
            append(NO_TAGGED_FIELDS)  # of the partition
        append(NO_TAGGED_FIELDS)  # of the topic
    append(_TAIL)
    return b"".join(out)
