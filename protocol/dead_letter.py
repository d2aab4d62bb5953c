"""Dead-letter records of share groups (KIP-1191): their context headers and their batch.

A record a share group gives up on (REJECTed, or released at the delivery-count limit) is
copied to the group's dead-letter topic as a new record whose headers say where it came from.
Without `errors.deadletterqueue.copy.record.enable` the copy has no key or value: the headers
alone point at the source record. The header names are Kafka's, so tools written for Kafka's
dead-letter records read Shoal's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from protocol.record_batch import encode_varint
from protocol.record_batch import read_varint
from protocol.record_batch import seal_batch

HEADER_TOPIC = "__dlq.errors.topic"
HEADER_PARTITION = "__dlq.errors.partition"
HEADER_OFFSET = "__dlq.errors.offset"
HEADER_GROUP = "__dlq.errors.group"
HEADER_DELIVERY_COUNT = "__dlq.errors.delivery.count"
HEADER_MESSAGE = "__dlq.errors.message"  # the reason

# The reasons, in the words Kafka's broker writes.
REJECTED = "Offset rejected by client."
DELIVERY_LIMIT = "Offset delivery count exceeded the threshold."


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One source record on its way to the dead-letter topic."""

    offset: int
    delivery_count: int
    reason: str
    key: bytes | None = None
    value: bytes | None = None


def build_dead_letter_batch(
    topic: str, partition: int, group: str, letters: Sequence[DeadLetter], *, timestamp_ms: int
) -> bytes:
    """One uncompressed batch, a record per letter, each with its context headers. The
    timestamp is the time of the copy: the dead-letter topic's retention starts then.

    Records are encoded here rather than by `build_batch`: the headers naming the topic,
    partition, group and reason are the same for every letter, so they are encoded once."""
    before_offset = _header(HEADER_TOPIC, topic) + _header(HEADER_PARTITION, str(partition))
    group_header = _header(HEADER_GROUP, group)
    reasons: dict[str, bytes] = {}
    body = bytearray()
    for delta, d in enumerate(letters):
        reason = reasons.get(d.reason)
        if reason is None:
            reason = reasons[d.reason] = _header(HEADER_MESSAGE, d.reason)
        record = bytearray(_NO_ATTRIBUTES_NO_TIME_DELTA)
        record += encode_varint(delta)
        record += _nullable(d.key)
        record += _nullable(d.value)
        record += _SIX_HEADERS
        record += before_offset
        record += _header(HEADER_OFFSET, str(d.offset))
        record += group_header
        record += _header(HEADER_DELIVERY_COUNT, str(d.delivery_count))
        record += reason
        body += encode_varint(len(record))
        body += record
    return seal_batch(bytes(body), len(letters), timestamp_ms=timestamp_ms)


_NO_ATTRIBUTES_NO_TIME_DELTA = b"\x00" + encode_varint(0)
_SIX_HEADERS = encode_varint(6)


def _nullable(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def _header(key: str, value: str) -> bytes:
    k, v = key.encode(), value.encode()
    return encode_varint(len(k)) + k + encode_varint(len(v)) + v


def key_and_value(tail: bytes) -> tuple[bytes | None, bytes | None]:
    """Key and value of a stored record from its tail (`protocol.records.Record.tail`)."""
    key_len, pos = read_varint(tail, 0)
    key = tail[pos : pos + key_len] if key_len >= 0 else None
    pos += max(key_len, 0)
    value_len, pos = read_varint(tail, pos)
    value = tail[pos : pos + value_len] if value_len >= 0 else None
    return key, value


def dead_letter_problem(
    group: str, topic: str, prefix: str, exists: bool, enabled: bool
) -> str | None:
    """Why records of `group` cannot go to `topic` (KIP-1191's rules), or None if they can.
    An empty `topic` means the group has no dead-letter topic: not a problem."""
    if not topic:
        return None
    if topic.startswith("__"):
        return f"dead-letter topic {topic} of group {group} cannot be an internal topic"
    if prefix and not topic.startswith(prefix):
        return f"dead-letter topic {topic} of group {group} does not start with {prefix!r}"
    if not exists:
        return f"dead-letter topic {topic} of group {group} does not exist"
    if not enabled:
        return (
            f"dead-letter topic {topic} of group {group} does not have "
            "errors.deadletterqueue.group.enable=true"
        )
    return None
