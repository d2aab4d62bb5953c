"""Where a share group's given-up records go, and what is written there (KIP-1191).

The share-partition manager calls these from its dead-letter duty, never on the fetch path:
`resolve` checks the group's dead-letter topic against KIP-1191's rules (named, permitted
prefix, exists, opted in with `errors.deadletterqueue.group.enable`), and `dead_letters`
turns ARCHIVING ranges into the records to write. Records are decoded only when the group
asks for copies of them (`errors.deadletterqueue.copy.record.enable`), and only here.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from dataclasses import dataclass

from broker.share.share_logs import ShareLogs
from broker.share.window import StateRange
from coordinator.group_configs import GroupConfigs
from protocol.dead_letter import DELIVERY_LIMIT
from protocol.dead_letter import REJECTED
from protocol.dead_letter import DeadLetter
from protocol.dead_letter import dead_letter_problem
from protocol.dead_letter import key_and_value
from protocol.record_batch import InvalidRecordBatch
from protocol.record_batch import iter_batch_headers
from protocol.records import decode_records
from storage.config import dlq_enabled
from storage.errors import OffsetOutOfRange
from storage.log import PartitionLog

READ_BYTES = 1024 * 1024  # one read of the source log when records are copied


@dataclass(frozen=True, slots=True)
class Target:
    """A usable dead-letter partition: the source partition modulo the topic's partitions."""

    topic: str
    partition: int
    log: PartitionLog
    copy_record: bool


def resolve(
    logs: ShareLogs,
    configs: GroupConfigs,
    prefix: str,
    group_id: str,
    source_topic: str | None,
    source_partition: int,
) -> Target | str | None:
    """The group's dead-letter partition for records of `source_partition`; a string saying
    why it cannot be used; None when the group has no dead-letter topic (any more)."""
    config = configs.share(group_id)
    name = config.dead_letter_topic
    if not name:
        return None
    if name == source_topic:  # each copy would come back to the group, and on without end
        return f"dead-letter topic {name} of group {group_id} is the topic it reads"
    topic = logs.topic(name)
    problem = dead_letter_problem(
        group_id, name, prefix, topic is not None, topic is not None and dlq_enabled(topic.configs)
    )
    if problem is not None or topic is None:
        return problem or f"dead-letter topic {name} of group {group_id} does not exist"
    partition = source_partition % topic.partitions
    plog = logs.log(name, partition)
    if plog is None:
        return f"dead-letter topic {name} of group {group_id} has no partition {partition}"
    return Target(name, partition, plog, config.dead_letter_copy_record)


def dead_letters(
    runs: Sequence[StateRange],
    reasons: Callable[[StateRange], list[tuple[int, int, bool | None]]],
    delivery_count_limit: int,
    source: PartitionLog | None,
) -> list[DeadLetter]:
    """A letter per ARCHIVING offset of `runs`, with key and value from `source` when given
    (a record the log no longer holds goes as a pointer: headers only).

    `reasons` (`Archiving.reasons`) says why each part was given up; durable
    state does not, so for a record given up before a restart a count at the limit means the
    limit and any other count a REJECT (as Kafka tells them apart on recovery)."""
    stored = _stored_records(runs, source) if source is not None else {}
    out: list[DeadLetter] = []
    for r in runs:
        for first, last, rejected in reasons(r):
            if rejected is None:
                rejected = r.delivery_count < delivery_count_limit
            reason = REJECTED if rejected else DELIVERY_LIMIT
            for offset in range(first, last + 1):
                key, value = stored.get(offset, (None, None))
                out.append(DeadLetter(offset, r.delivery_count, reason, key, value))
    return out


def _stored_records(
    runs: Sequence[StateRange], source: PartitionLog
) -> dict[int, tuple[bytes | None, bytes | None]]:
    """Key and value of every offset of `runs` the source log still holds."""
    wanted = {o for r in runs for o in range(r.first_offset, r.last_offset + 1)}
    found: dict[int, tuple[bytes | None, bytes | None]] = {}
    offset, last = min(wanted), max(wanted)
    while offset <= last:
        try:
            data = source.read(max(offset, source.log_start_offset), READ_BYTES)
        except OffsetOutOfRange:
            break
        if not data:
            break
        end = offset
        for base, tail in _records(data):
            if base in wanted:
                found[base] = key_and_value(tail)
            end = max(end, base + 1)
        for _, header in iter_batch_headers(data):
            end = max(end, header.last_offset + 1)
        if end <= offset:
            break
        offset = end
    return found


def _records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, tail) of every data record in whole stored batches; damaged ones skipped."""
    for pos, header in iter_batch_headers(data):
        if header.is_control:
            continue
        try:
            _, records = decode_records(memoryview(data)[pos : pos + header.size])
        except InvalidRecordBatch:
            continue  # storage reports damage when it reads; the copy goes as a pointer
        for rec in records:
            yield header.base_offset + rec.offset_delta, rec.tail
