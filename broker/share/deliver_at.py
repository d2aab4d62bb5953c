"""Delivery times of the records a ShareFetch read, for topics with scheduled delivery only.

On a topic with `shoal.scheduled.delivery.enable=true`, a record with the header
`shoal.deliver.at.ms` (epoch milliseconds, ASCII decimal) is not acquired before that time.
This is the one place such a fetch decodes records, as `key_hashes.py` is for key-ordered
groups; every other topic's fetch stays header-only (as the cleaner reads keys only on
compacted topics).

A value that is not a plain decimal number, or lies more than `MAX_AHEAD_MS` ahead (7 days,
Kafka's default `retention.ms`: the record would most likely be deleted before its time), is
delivered now, with one log line per fetch that meets it: a consumer sees the record, where a
wait on a bad value would hide it for good. A time already past is no wait.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import structlog

from broker.share.span_records import span_records
from protocol.records import header_values
from storage.log import BatchSpan

log = structlog.get_logger("shoal.share")

DELIVER_AT_HEADER = b"shoal.deliver.at.ms"
MAX_AHEAD_MS = 7 * 24 * 60 * 60 * 1000
_MAX_DIGITS = 19  # an int64 of epoch ms


def deliver_at_times(
    data: bytes, spans: Sequence[BatchSpan], now_ms: int, where: tuple[str, uuid.UUID, int]
) -> dict[int, int]:
    """offset -> delivery time, for every record of the data batches whose
    `shoal.deliver.at.ms` lies ahead of `now_ms` (within `MAX_AHEAD_MS`)."""
    group, topic_id, partition = where  # the share-partition, for log lines
    out: dict[int, int] = {}
    bad: list[int] = []
    values = span_records(
        data, spans, lambda batch: header_values(batch, DELIVER_AT_HEADER),
        "records not readable for scheduled delivery; delivered now",
        group=group, topic_id=str(topic_id), partition=partition,
    )  # fmt: skip
    for offset, value in values:
        at = parse_time(value)
        if at is None or at - now_ms > MAX_AHEAD_MS:
            bad.append(offset)
        elif at > now_ms:
            out[offset] = at
    if bad:
        log.warning(
            "shoal.deliver.at.ms not a decimal epoch-ms time within 7 days; delivered now",
            group=group, topic_id=str(topic_id), partition=partition, records=len(bad),
            first_offset=bad[0],
        )  # fmt: skip
    return out


def parse_time(value: bytes | None) -> int | None:
    """Epoch ms from an ASCII decimal header value; None if it is not one."""
    if value is None or not 0 < len(value) <= _MAX_DIGITS or not value.isdigit():
        return None
    return int(value)
