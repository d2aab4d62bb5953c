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

_TOP = struct.Struct(">ih")  # throttle time, error code
_LOCK_TIMEOUT = struct.Struct(">i")
_PARTITION = struct.Struct(">ih")  # partition index, error code
_ACK_CODE = struct.Struct(">h")
_LEADER = struct.Struct(">iib")  # leader id, leader epoch, its empty tagged fields
_ACQUIRED = struct.Struct(">qqhb")  # first, last, delivery count, empty tagged fields


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
    acquired: Sequence[AcquiredRange]


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
    out = [
        _TOP.pack(throttle_time_ms, error_code),
        nullable_string(error_message, True),
        _LOCK_TIMEOUT.pack(lock_timeout_ms),
        array_length(len(topics), True),
    ]
    for topic_id, partitions in topics:
        out.append(topic_id.bytes)
        out.append(array_length(len(partitions), True))
        for p in partitions:
            out.append(_PARTITION.pack(p.partition, p.error_code))
            out.append(b"\x00")  # error_message: null
            out.append(_ACK_CODE.pack(p.acknowledge_error_code))
            out.append(nullable_string(p.acknowledge_error_message, True))
            out.append(_LEADER.pack(p.leader_id, p.leader_epoch, 0))
            out.append(uvarint(len(p.records) + 1))
            out.append(p.records)
            out.append(array_length(len(p.acquired), True))
            out.extend(_ACQUIRED.pack(*a, 0) for a in p.acquired)
            out.append(NO_TAGGED_FIELDS)  # of the partition
        out.append(NO_TAGGED_FIELDS)  # of the topic
    out.append(array_length(0, True))  # node endpoints
    out.append(NO_TAGGED_FIELDS)  # of the response
    return b"".join(out)
