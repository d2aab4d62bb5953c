"""Per-log settings, named after Kafka's topic configs."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from storage.errors import InvalidConfig

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_DAY_MS = 24 * 60 * 60 * 1000

# Kafka topic config name -> LogConfig field.
TOPIC_CONFIG_FIELDS: Mapping[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_interval_ms",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
}
# Fields that are not integers, with their parsers.
_PARSERS: Mapping[str, type[str] | type[float]] = {
    "cleanup_policy": str,
    "min_cleanable_dirty_ratio": float,
}

# KIP-1191: a topic serves as a share group's dead-letter topic only with this set to true.
DLQ_GROUP_ENABLE = "errors.deadletterqueue.group.enable"

# Shoal's scheduled delivery (issue 35): on such a topic, a record with the header
# `shoal.deliver.at.ms` is not acquired by any share group before that time.
SCHEDULED_DELIVERY_ENABLE = "shoal.scheduled.delivery.enable"

# Kafka topic configs Shoal keeps on the topic without acting on them in the log (the
# dead-letter copier reads DLQ_GROUP_ENABLE from the topic).
STORED_TOPIC_CONFIGS = frozenset(
    {
        DLQ_GROUP_ENABLE,
        SCHEDULED_DELIVERY_ENABLE,
        "compression.type",
        "max.message.bytes",
        "message.timestamp.type",
        "min.insync.replicas",
        "retention.local.ms",
        "retention.local.bytes",
    }
)


def check_topic_config_names(names: Iterable[str]) -> None:
    """The one check of topic config names, for CreateTopics and for altering configs.

    :raises InvalidConfig: a name that is not a Kafka topic config Shoal knows."""
    unknown = sorted(set(names) - set(TOPIC_CONFIG_FIELDS) - STORED_TOPIC_CONFIGS)
    if unknown:
        raise InvalidConfig(f"unknown topic config(s): {', '.join(unknown)}")


CLEANUP_POLICIES = ("compact", "delete")


# The stored configs' values as Kafka's LogConfig defines them (storage/.../log/LogConfig.java:
# compression.type `in(BrokerCompressionType.names())`, message.timestamp.type `in("CreateTime",
# "LogAppendTime")`, max.message.bytes INT `atLeast(0)`, min.insync.replicas INT `atLeast(1)`,
# retention.local.ms and .bytes LONG `atLeast(-2)`), refused with ConfigDef's messages.
_CHOICES: Mapping[str, tuple[str, ...]] = {
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
}
_NUMBERS: Mapping[str, tuple[str, int, int]] = {  # type, its bits, the least value
    "max.message.bytes": ("INT", 32, 0),
    "min.insync.replicas": ("INT", 32, 1),
    "retention.local.ms": ("LONG", 64, -2),
    "retention.local.bytes": ("LONG", 64, -2),
}
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Integer.parseInt / Long.parseLong take


def _check_stored(name: str, value: str) -> None:
    """:raises InvalidConfig: as Kafka's ConfigDef refuses the value."""
    trimmed = value.strip()  # ConfigDef.parseType trims a string value
    choices = _CHOICES.get(name)
    if choices is not None and trimmed not in choices:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: "
            f"String must be one of: {', '.join(choices)}"
        )
    number = _NUMBERS.get(name)
    if number is None:
        return
    kind, bits, least = number
    n = int(trimmed) if _JAVA_INTEGER.fullmatch(trimmed) else None
    if n is None or not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: Not a number of type {kind}"
        )
    if n < least:
        raise InvalidConfig(
            f"Invalid value {value} for configuration {name}: Value must be at least {least}"
        )


def check_topic_config_values(configs: Mapping[str, str | None]) -> None:
    """Values a topic config name alone does not vouch for (the integer ones: `with_overrides`).

    :raises InvalidConfig: `cleanup.policy` is not a list of `delete` and `compact`,
        `errors.deadletterqueue.group.enable` is not a boolean, or a stored config's value is
        not one Kafka takes (`_CHOICES`, `_NUMBERS`)."""
    for name, value in configs.items():
        if value is not None and (name in _CHOICES or name in _NUMBERS):
            _check_stored(name, value)
    for name in (DLQ_GROUP_ENABLE, SCHEDULED_DELIVERY_ENABLE):
        enable = configs.get(name)
        if enable is not None and enable.lower() not in ("true", "false"):
            raise InvalidConfig(
                f"Invalid value {enable} for configuration {name}: "
                "Expected value to be either true or false"
            )
    policy = configs.get("cleanup.policy")
    if policy is not None and (
        not policy.strip() or any(p.strip() not in CLEANUP_POLICIES for p in policy.split(","))
    ):
        raise InvalidConfig(
            f"Invalid value {policy} for configuration cleanup.policy: "
            f"String must be one of: {', '.join(CLEANUP_POLICIES)}"
        )


def scheduled_delivery(configs: Mapping[str, str]) -> bool:
    """Whether a topic with these configs delays records by their `shoal.deliver.at.ms`."""
    return configs.get(SCHEDULED_DELIVERY_ENABLE, "false").lower() == "true"


def dlq_enabled(configs: Mapping[str, str]) -> bool:
    """Whether a topic with these configs may serve as a share group's dead-letter topic."""
    return configs.get(DLQ_GROUP_ENABLE, "false").lower() == "true"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    retention_ms: int = 7 * _DAY_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    index_interval_bytes: int = 4096
    flush_messages: int = _INT64_MAX  # 1: fsync before every append returns
    flush_interval_ms: int = 1000  # the broker calls flush() on this interval
    producer_id_expiration_ms: int = _DAY_MS
    cleanup_policy: str = "delete"  # "compact", "delete" or "compact,delete"
    delete_retention_ms: int = _DAY_MS  # how long a cleaned tombstone stays readable
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0

    # Keys are required and the cleaner keeps the latest record of each. Parsed from
    # cleanup_policy once, and a plain attribute: it is read on every append.
    compact: bool = field(init=False, repr=False, compare=False)

    @property
    def delete(self) -> bool:
        """retention.ms / retention.bytes delete old segments."""
        return "delete" in self._policies

    @property
    def _policies(self) -> set[str]:
        return {p.strip() for p in self.cleanup_policy.split(",")}

    def __post_init__(self) -> None:
        object.__setattr__(self, "compact", "compact" in self._policies)
        # Positions in the offset index are int32, so a segment cannot outgrow that.
        if not 14 <= self.segment_bytes <= _INT32_MAX:
            raise InvalidConfig(f"segment.bytes {self.segment_bytes} out of range")
        if self.segment_ms < 1 or self.index_interval_bytes < 0 or self.flush_messages < 1:
            raise InvalidConfig("segment.ms, index.interval.bytes and flush.messages too low")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise InvalidConfig(f"min.cleanable.dirty.ratio {self.min_cleanable_dirty_ratio}")

    def with_overrides(self, configs: Mapping[str, str]) -> LogConfig:
        """Apply topic configs (Kafka names, string values); other names are ignored, so a
        topic stored before a name was refused still opens.

        :raises InvalidConfig: a value that does not parse or fit."""
        changes: dict[str, Any] = {}
        for name, value in configs.items():
            field = TOPIC_CONFIG_FIELDS.get(name)
            if field is None:
                continue
            parse = _PARSERS.get(field, int)
            try:
                changes[field] = parse(value)
            except ValueError:
                raise InvalidConfig(f"{name}={value!r} is not {parse.__name__}") from None
        return dataclasses.replace(self, **changes) if changes else self
