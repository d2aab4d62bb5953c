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

from protocol.record_batch import NewRecord
from protocol.record_batch import build_batch
from protocol.record_batch import read_varint

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
    timestamp is the time of the copy: the dead-letter topic's retention starts then."""
    fixed = [
        (HEADER_TOPIC.encode(), topic.encode()),
        (HEADER_PARTITION.encode(), str(partition).encode()),
    ]
    group_header = (HEADER_GROUP.encode(), group.encode())
    records = [
        NewRecord(
            d.key,
            d.value,
            [
                *fixed,
                (HEADER_OFFSET.encode(), str(d.offset).encode()),
                group_header,
                (HEADER_DELIVERY_COUNT.encode(), str(d.delivery_count).encode()),
                (HEADER_MESSAGE.encode(), d.reason.encode()),
            ],
        )
        for d in letters
    ]
    return build_batch(records, timestamp_ms=timestamp_ms)


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
