"""ProduceResponse v3-v12 written straight from plain values: the hot path's own serialiser.

A broker answers every produce request, and for one-record batches kio's generic writer (plus
the dataclasses it writes from) cost more than the append itself. kio stays the source of
truth: `tests/unit/test_produce_response.py` checks these bytes against kio's writer for every
version on Hypothesis-generated results, so the two can never disagree.

Layout (ProduceResponse.json): responses [name, partition_responses [index int32, error_code
int16, base_offset int64, log_append_time_ms int64, log_start_offset int64 (v5+), record_errors
[batch_index int32, batch_index_error_message nullable string] (v8+), error_message nullable
string (v8+)]], throttle_time_ms int32. v9+ is flexible: compact strings and arrays, and an empty
tagged-field section after each struct (the current leader and node endpoints, tagged from v10,
keep their defaults: kio leaves them out). Record errors (KIP-467) name the records that failed a
batch; versions before 8 have no field for them, and only the partition's error code goes out.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from protocol.wire import INT32
from protocol.wire import NO_TAGGED_FIELDS
from protocol.wire import array_length
from protocol.wire import nullable_string
from protocol.wire import string

MIN_VERSION = 3
MAX_VERSION = 12
FIRST_FLEXIBLE = 9

NO_TIMESTAMP = -1  # log_append_time_ms: the topic uses CreateTime

# A partition's fixed fields, by version: index, error code, base offset, log append time,
# then (v5+) log start offset, then (v8+) record_errors' length (always empty here).
_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_PARTITION_V8 = struct.Struct(">ihqqqi")
_PARTITION_V9 = struct.Struct(">ihqqqB")
# What follows them when there is no error message: a null string, and (v9+) no tags.
_NO_MESSAGE_V8 = b"\xff\xff"
_NO_MESSAGE_V9 = b"\x00" + NO_TAGGED_FIELDS
# The usual answer of a flexible version (one topic, one partition, no message), after its
# topic's name: the partition's fixed fields, a null message and the partition's, the topic's
# and (after throttle_time_ms) the response's empty tagged fields.
_ONE_PARTITION_V9 = struct.Struct(">ihqqqBBBBiB")


class RecordError(NamedTuple):
    """A record that made its batch fail (KIP-467): its index in the batch, and why."""

    batch_index: int
    message: str | None


class PartitionResult(NamedTuple):
    """One partition's answer to a produce request."""

    partition: int
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: str | None = None
    # The records that failed the batch (only with an error code; empty on the hot path).
    record_errors: tuple[RecordError, ...] = ()


TopicResults = tuple[str, Sequence[PartitionResult]]

# Encoded topic names, by flexible then name: a producer names the same few topics every time
# (one dict each: a str key hashes for free, a (name, flexible) tuple does not).
_NAMES: tuple[dict[str, bytes], dict[str, bytes]] = ({}, {})
_NAMES_MAX = 10_000
# Per name, what precedes a flexible one-topic, one-partition answer's fixed fields.
_ONE_TOPIC_V9: dict[str, bytes] = {}


def _name(name: str, flexible: bool) -> bytes:
    names = _NAMES[flexible]
    encoded = names.get(name)
    if encoded is None:
        if len(names) >= _NAMES_MAX:
            names.clear()
        encoded = names[name] = string(name, flexible)
    return encoded


def _one_topic_v9(name: str) -> bytes:
    prefix = _ONE_TOPIC_V9.get(name)
    if prefix is None:
        if len(_ONE_TOPIC_V9) >= _NAMES_MAX:
            _ONE_TOPIC_V9.clear()
        # One topic, its name, one partition (compact array lengths are n + 1).
        prefix = _ONE_TOPIC_V9[name] = b"\x02" + string(name, True) + b"\x02"
    return prefix


def encode_produce_response(
    version: int, topics: Sequence[TopicResults], throttle_time_ms: int = 0
) -> bytes:
    """The response body (no header) for a request of `version`."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"ProduceResponse v{version} is not served by this encoder")
    flexible = version >= FIRST_FLEXIBLE
    if flexible and len(topics) == 1:  # one-record producers: one pack, no list to join
        name, partitions = topics[0]
        if len(partitions) == 1:
            p = partitions[0]
            if p.error_message is None and not p.record_errors:
                prefix = _ONE_TOPIC_V9.get(name) or _one_topic_v9(name)  # a call the first time
                return prefix + _ONE_PARTITION_V9.pack(
                    p.partition, p.error_code, p.base_offset, NO_TIMESTAMP, p.log_start_offset,
                    1, 0, 0, 0, throttle_time_ms, 0)  # fmt: skip
    out = [array_length(len(topics), flexible)]
    for name, partitions in topics:
        out.append(_name(name, flexible))
        out.append(array_length(len(partitions), flexible))
        _partitions(out, version, flexible, partitions)
        if flexible:
            out.append(NO_TAGGED_FIELDS)  # of the topic
    out.append(INT32.pack(throttle_time_ms))
    if flexible:
        out.append(NO_TAGGED_FIELDS)  # of the response
    return b"".join(out)


def _partitions(
    out: list[bytes], version: int, flexible: bool, partitions: Sequence[PartitionResult]
) -> None:
    """One topic's partition answers, appended to `out`."""
    if version >= 8:
        fixed = _PARTITION_V9 if flexible else _PARTITION_V8
        no_errors = 1 if flexible else 0  # an empty array: compact length 0 + 1, or 0
        no_message = _NO_MESSAGE_V9 if flexible else _NO_MESSAGE_V8
        for p in partitions:
            if p.record_errors:
                _record_errors(out, flexible, p)
            else:
                out.append(fixed.pack(p.partition, p.error_code, p.base_offset, NO_TIMESTAMP,
                                      p.log_start_offset, no_errors))  # fmt: skip
            if p.error_message is None:
                out.append(no_message)
            else:
                out.append(nullable_string(p.error_message, flexible))
                if flexible:
                    out.append(NO_TAGGED_FIELDS)  # of the partition
    elif version >= 5:
        out.extend(_PARTITION_V5.pack(p.partition, p.error_code, p.base_offset, NO_TIMESTAMP,
                                      p.log_start_offset) for p in partitions)  # fmt: skip
    else:
        out.extend(_PARTITION_V3.pack(p.partition, p.error_code, p.base_offset, NO_TIMESTAMP)
                   for p in partitions)  # fmt: skip


def _record_errors(out: list[bytes], flexible: bool, p: PartitionResult) -> None:
    """A v8+ partition's fixed fields and its record errors (a failed batch: off the hot path)."""
    out.append(_PARTITION_V5.pack(p.partition, p.error_code, p.base_offset, NO_TIMESTAMP,
                                  p.log_start_offset))  # fmt: skip
    out.append(array_length(len(p.record_errors), flexible))
    for e in p.record_errors:
        out.append(INT32.pack(e.batch_index))
        out.append(nullable_string(e.message, flexible))
        if flexible:
            out.append(NO_TAGGED_FIELDS)  # of the record error
