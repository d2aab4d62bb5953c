"""Data source options: Spark's Kafka source names where they mean the same, plus Shoal's own.

Spark hands options as a case-insensitive string map; everything is parsed once here so a wrong
value fails when the query is defined, not in the middle of a batch.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
_ACK_MODES = (AT_LEAST_ONCE, AT_MOST_ONCE)
# How a micro-batch's records reach the executors (spark.stream): the driver ships the stored
# batches it acquired, or each task fetches its ranges from the broker. The first is the default.
SHIP = "ship"
FETCH = "fetch"
DATA_PATHS = (SHIP, FETCH)


def _get(options: Mapping[str, str], *names: str) -> str | None:
    lowered = {k.lower(): v for k, v in options.items()}
    for n in names:
        v = lowered.get(n.lower())
        if v is not None and v != "":
            return str(v)
    return None


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _choice(options: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = (_get(options, name) or choices[0]).lower()
    if value not in choices:
        raise ValueError(f"option {name} must be one of {choices}, got {value!r}")
    return value


def bootstrap_of(options: Mapping[str, str]) -> str:
    bootstrap = _get(options, "kafka.bootstrap.servers", "bootstrap.servers")
    if bootstrap is None:
        raise ValueError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    return bootstrap


def topics_of(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(options, "subscribe")
    if raw is None:
        if _get(options, "subscribePattern", "assign") is not None:
            raise ValueError("only the subscribe option is supported (no subscribePattern/assign)")
        raise ValueError("option subscribe (comma-separated topics) is required")
    topics = tuple(t.strip() for t in raw.split(",") if t.strip())
    if not topics:
        raise ValueError("option subscribe names no topic")
    return topics


def default_ack_dir(group: str) -> str:
    """Where `shoal_ack` leaves per-batch verdicts for the group's readers on this driver."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", group)
    return os.path.join(tempfile.gettempdir(), "shoal-acks", safe)


@dataclass(frozen=True)
class StreamOptions:
    """`spark.readStream.format("shoal")`."""

    bootstrap: str
    topics: tuple[str, ...]
    group: str
    max_records_per_trigger: int | None
    num_partitions: int | None
    ack_mode: str
    ack_dir: str
    poll_timeout_ms: int
    renew_interval_ms: int | None
    max_records_per_batch: int
    data_path: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        group = _get(options, "group", "kafka.group.id", "group.id")
        if group is None:
            raise ValueError("option group (the share group) is required")
        ack_mode = (_get(options, "acknowledgementMode") or AT_LEAST_ONCE).lower()
        if ack_mode not in _ACK_MODES:
            raise ValueError(f"option acknowledgementMode must be one of {_ACK_MODES}")
        for unsupported in ("startingOffsets", "endingOffsets", "startingTimestamp"):
            if _get(options, unsupported) is not None:
                raise ValueError(
                    f"option {unsupported} does not apply to a share group: its position is the "
                    "group's (set share.auto.offset.reset, or reset offsets with the admin API)"
                )
        return cls(
            bootstrap=bootstrap_of(options),
            topics=topics_of(options),
            group=group,
            max_records_per_trigger=_int(options, "maxRecordsPerTrigger", None, 1)
            or _int(options, "maxOffsetsPerTrigger", None, 1),  # Spark's Kafka source name
            num_partitions=_int(options, "numPartitions", None, 1),
            ack_mode=ack_mode,
            ack_dir=_get(options, "ackDir") or default_ack_dir(group),
            poll_timeout_ms=_int(options, "pollTimeoutMs", 1000, 0) or 0,
            renew_interval_ms=_int(options, "renewIntervalMs", None, 50),
            max_records_per_batch=_int(options, "maxRecordsPerBatch", 1_000_000, 1) or 1,
            data_path=_choice(options, "dataPath", DATA_PATHS),
        )


OffsetBound = str | dict[str, dict[str, int]]


def _offset_bound(raw: str | None, name: str, default: str) -> OffsetBound:
    if raw is None:
        return default
    if raw.strip().lower() in ("earliest", "latest"):
        return raw.strip().lower()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError(f"option {name} is earliest, latest or JSON, got {raw!r}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f'option {name} JSON must look like {{"topic": {{"0": 23}}}}')
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}


@dataclass(frozen=True)
class BatchOptions:
    """`spark.read.format("shoal")`: a plain Fetch, no share-group state touched."""

    bootstrap: str
    topics: tuple[str, ...]
    starting: OffsetBound
    ending: OffsetBound
    starting_timestamp: int | None
    max_partition_bytes: int
    num_partitions: int | None = None  # Spark tasks; by default one per Kafka partition

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> BatchOptions:
        return cls(
            bootstrap=bootstrap_of(options),
            topics=topics_of(options),
            starting=_offset_bound(_get(options, "startingOffsets"), "startingOffsets", "earliest"),
            ending=_offset_bound(_get(options, "endingOffsets"), "endingOffsets", "latest"),
            starting_timestamp=_int(options, "startingTimestamp", None, 0),
            max_partition_bytes=_int(options, "fetch.max.bytes", 8 << 20, 1024) or 8 << 20,
            num_partitions=_int(options, "numPartitions", None, 1),
        )


@dataclass(frozen=True)
class WriteOptions:
    """`df.write.format("shoal")` / `writeStream`."""

    bootstrap: str
    topic: str | None
    acks: int
    batch_records: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        acks = _get(options, "kafka.acks", "acks") or "all"
        acks_value = -1 if acks == "all" else int(acks)
        return cls(
            bootstrap=bootstrap_of(options),
            topic=_get(options, "topic"),
            acks=acks_value,
            batch_records=_int(options, "batchRecords", 5000, 1) or 5000,
        )
