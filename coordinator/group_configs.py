"""Group configs (Kafka's `GroupConfig`), bounded by broker configs (seed 002): the share
groups' `share.*` and KIP-848 consumer groups' `consumer.*` (Kafka 4.1/4.2 have these two:
`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`). One table for every kind,
as Kafka keys them by group id alone.

- Setting a group config validates it against the broker's bounds and rejects what is outside;
  the group's session timeout must stay above its heartbeat interval (Kafka's
  `GroupConfig.validateValues`, over the group's stored values and the broker defaults).
- The broker starts even when stored values lie outside bounds changed since.
- Reading the effective value caps it by the current bounds.
The broker reads a group's values in force as one typed view per kind (`share(group_id)`,
`consumer(group_id)`), by attribute; `effective(group_id, name)` is for the wire's names
(DescribeConfigs). Stored configs live in one JSON file, rewritten atomically on every
change (changes are rare).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from coordinator.errors import CoordinatorException
from storage.fsutil import atomic_write


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    kind: type
    broker_default: str | None  # broker config giving the default; None: `default` below
    broker_min: str | None = None
    broker_max: str | None = None
    choices: tuple[str, ...] = ()
    default: Any = None
    # A further rule on a parsed value, given the broker configs (checked when set, seed 002).
    check: Callable[[Any, Callable[[str], Any]], None] | None = None


DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD = "errors.deadletterqueue.copy.record.enable"
DLQ_PREFIX = "errors.deadletterqueue.topic.name.prefix"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _check_dlq_topic(name: str, broker: Callable[[str], Any]) -> None:
    """KIP-1191: a DLQ topic name is a legal topic name, not an internal one, with the
    broker's permitted prefix. Empty turns the DLQ off. Whether the topic exists and is
    enabled is checked when records are copied: it may be created or altered later."""
    if not name:
        return
    if not _LEGAL_TOPIC.fullmatch(name) or name in (".", ".."):
        raise InvalidGroupConfig(f"{DLQ_TOPIC}={name!r} is not a legal topic name")
    if name.startswith("__"):
        raise InvalidGroupConfig(f"{DLQ_TOPIC}={name!r} cannot start with __ (internal topics)")
    prefix = broker(DLQ_PREFIX)
    if prefix and not name.startswith(prefix):
        raise InvalidGroupConfig(
            f"{DLQ_TOPIC}={name!r} does not start with {prefix!r} ({DLQ_PREFIX})"
        )


ACQUIRE_MODES = ("batch_optimized", "record_limit")
# Shoal's retry backoff (issue 35): a released record waits
# min(max, initial * multiplier^(deliveryCount - 1)) ms before it is acquired again.
BACKOFF_INITIAL = "share.release.backoff.initial.ms"
BACKOFF_MAX = "share.release.backoff.max.ms"
BACKOFF_MULTIPLIER = "share.release.backoff.multiplier"
# Key-ordered sharing with up to N records of a key in flight at once (issue 35 part 4).
PER_KEY = "share.key.ordering.max.in.flight.per.key"
ISOLATION_LEVEL = "share.isolation.level"
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

DEFS: dict[str, GroupConfigDef] = {
    d.name: d
    for d in (
        GroupConfigDef(
            "share.auto.offset.reset",
            str,
            "group.share.auto.offset.reset",
            choices=("latest", "earliest"),
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            int,
            "group.share.record.lock.duration.ms",
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
        GroupConfigDef(
            "share.delivery.count.limit",
            int,
            "group.share.delivery.count.limit",
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
        ),
        GroupConfigDef(
            "share.partition.max.record.locks",
            int,
            "group.share.partition.max.record.locks",
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
        GroupConfigDef(
            "share.renew.acknowledge.enable", bool, "group.share.renew.acknowledge.enable"
        ),
        # KIP-1206: record_limit makes MaxRecords (max.poll.records) a strict limit.
        GroupConfigDef(
            "share.acquire.mode",
            str,
            "group.share.acquire.mode",
            choices=ACQUIRE_MODES,
        ),
        # Kafka's GroupConfig: read_committed acquires only below the LSO and never an aborted
        # transaction's records. No broker default: Kafka's is the constant read_uncommitted.
        GroupConfigDef(
            ISOLATION_LEVEL, str, None, choices=ISOLATION_LEVELS, default="read_uncommitted"
        ),
        # Shoal's own (seed 001): records of one key are never in flight at two members.
        GroupConfigDef("share.key.ordering.enable", bool, "group.share.key.ordering.enable"),
        GroupConfigDef(
            PER_KEY,
            int,
            "group.share.key.ordering.max.in.flight.per.key",
            "group.share.min.key.ordering.max.in.flight.per.key",
            "group.share.max.key.ordering.max.in.flight.per.key",
        ),
        GroupConfigDef(
            "share.session.timeout.ms",
            int,
            "group.share.session.timeout.ms",
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            int,
            "group.share.heartbeat.interval.ms",
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
        # KIP-848 consumer groups (ConsumerGroupHeartbeat): read at each member's heartbeat.
        GroupConfigDef(
            "consumer.session.timeout.ms",
            int,
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        GroupConfigDef(
            "consumer.heartbeat.interval.ms",
            int,
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
        # Shoal's retry backoff (issue 35), bounded by broker configs as KIP-1240's are.
        GroupConfigDef(
            BACKOFF_INITIAL,
            int,
            "group.share.release.backoff.initial.ms",
            "group.share.min.release.backoff.initial.ms",
            "group.share.max.release.backoff.initial.ms",
        ),
        GroupConfigDef(
            BACKOFF_MAX,
            int,
            "group.share.release.backoff.max.ms",
            "group.share.min.release.backoff.max.ms",
            "group.share.max.release.backoff.max.ms",
        ),
        GroupConfigDef(
            BACKOFF_MULTIPLIER,
            float,
            "group.share.release.backoff.multiplier",
            "group.share.min.release.backoff.multiplier",
            "group.share.max.release.backoff.multiplier",
        ),
        # KIP-1191 dead-letter topics: off unless a group names one.
        GroupConfigDef(DLQ_TOPIC, str, None, default="", check=_check_dlq_topic),
        GroupConfigDef(DLQ_COPY_RECORD, bool, None, default=False),
    )
}

# Broker configs behind the group configs: (default, type), KIP-932 and seed 002 defaults.
# broker.config.BrokerConfig declares the same as typed attributes (a unit test compares them).
BROKER_DEFAULTS: dict[str, tuple[Any, type]] = {
    "group.share.auto.offset.reset": ("latest", str),
    "group.share.record.lock.duration.ms": (30_000, int),
    "group.share.min.record.lock.duration.ms": (1_000, int),
    "group.share.max.record.lock.duration.ms": (60_000, int),
    "group.share.delivery.count.limit": (5, int),
    "group.share.min.delivery.count.limit": (2, int),
    "group.share.max.delivery.count.limit": (10, int),
    "group.share.partition.max.record.locks": (2_000, int),
    "group.share.min.partition.max.record.locks": (100, int),
    "group.share.max.partition.max.record.locks": (4_000, int),
    "group.share.renew.acknowledge.enable": (True, bool),
    "group.share.acquire.mode": ("batch_optimized", str),
    "group.share.key.ordering.enable": (False, bool),
    "group.share.key.ordering.max.in.flight.per.key": (1, int),
    "group.share.min.key.ordering.max.in.flight.per.key": (1, int),
    "group.share.max.key.ordering.max.in.flight.per.key": (100, int),
    "group.share.session.timeout.ms": (45_000, int),
    "group.share.min.session.timeout.ms": (45_000, int),
    "group.share.max.session.timeout.ms": (60_000, int),
    "group.share.heartbeat.interval.ms": (5_000, int),
    "group.share.min.heartbeat.interval.ms": (5_000, int),
    "group.share.max.heartbeat.interval.ms": (15_000, int),
    # Kafka sizes its share-session cache with this; it never refuses a group (nor does Shoal,
    # whose cache is group.share.max.share.sessions). Accepted so Kafka configs load unchanged.
    "group.share.max.groups": (10, int),
    "group.share.max.size": (200, int),
    # Retry backoff (issue 35): off by default; at most an hour.
    "group.share.release.backoff.initial.ms": (0, int),
    "group.share.min.release.backoff.initial.ms": (0, int),
    "group.share.max.release.backoff.initial.ms": (3_600_000, int),
    "group.share.release.backoff.max.ms": (60_000, int),
    "group.share.min.release.backoff.max.ms": (0, int),
    "group.share.max.release.backoff.max.ms": (3_600_000, int),
    "group.share.release.backoff.multiplier": (2.0, float),
    "group.share.min.release.backoff.multiplier": (1.0, float),
    "group.share.max.release.backoff.multiplier": (10.0, float),
    # KIP-1191: the names a group's dead-letter topic may have ("": any name).
    DLQ_PREFIX: ("dlq.", str),
    # KIP-848's, with Kafka's defaults (GroupCoordinatorConfig).
    "group.consumer.session.timeout.ms": (45_000, int),
    "group.consumer.min.session.timeout.ms": (45_000, int),
    "group.consumer.max.session.timeout.ms": (60_000, int),
    "group.consumer.heartbeat.interval.ms": (5_000, int),
    "group.consumer.min.heartbeat.interval.ms": (5_000, int),
    "group.consumer.max.heartbeat.interval.ms": (15_000, int),
}
# Static, as every GroupCoordinatorConfig setting is in Kafka; the rest above are dynamic
# in Shoal (seed 002).
STATIC_BROKER_CONFIGS = frozenset(n for n in BROKER_DEFAULTS if n.startswith("group.consumer."))
# Each group's session timeout must exceed its heartbeat interval.
SESSION_AND_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """A share group's configs in force, each capped by the broker's current bounds."""

    auto_offset_reset: str  # "latest" or "earliest"
    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    renew_acknowledge_enable: bool
    acquire_mode: str  # one of ACQUIRE_MODES
    isolation_level: str  # one of ISOLATION_LEVELS
    key_ordering_enable: bool
    key_ordering_max_in_flight_per_key: int  # 1: each key's records one at a time, in order
    session_timeout_ms: int
    heartbeat_interval_ms: int
    dead_letter_topic: str  # "": none
    dead_letter_copy_record: bool
    release_backoff_initial_ms: int  # 0: no retry backoff
    release_backoff_max_ms: int
    release_backoff_multiplier: float

    @property
    def record_limit(self) -> bool:
        """KIP-1206: MaxRecords is a strict limit."""
        return self.acquire_mode == "record_limit"

    @property
    def read_committed(self) -> bool:
        """Only committed transactional records are acquired."""
        return self.isolation_level == "read_committed"

    @property
    def starts_at_earliest(self) -> bool:
        return self.auto_offset_reset == "earliest"


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """A KIP-848 consumer group's configs in force, capped by the broker's current bounds."""

    session_timeout_ms: int
    heartbeat_interval_ms: int


# Each typed view's fields, by the Kafka name each reads (a unit test holds them to DEFS).
SHARE_FIELDS: dict[str, str] = {
    "auto_offset_reset": "share.auto.offset.reset",
    "record_lock_duration_ms": "share.record.lock.duration.ms",
    "delivery_count_limit": "share.delivery.count.limit",
    "partition_max_record_locks": "share.partition.max.record.locks",
    "renew_acknowledge_enable": "share.renew.acknowledge.enable",
    "acquire_mode": "share.acquire.mode",
    "isolation_level": ISOLATION_LEVEL,
    "key_ordering_enable": "share.key.ordering.enable",
    "key_ordering_max_in_flight_per_key": PER_KEY,
    "session_timeout_ms": "share.session.timeout.ms",
    "heartbeat_interval_ms": "share.heartbeat.interval.ms",
    "dead_letter_topic": DLQ_TOPIC,
    "dead_letter_copy_record": DLQ_COPY_RECORD,
    "release_backoff_initial_ms": BACKOFF_INITIAL,
    "release_backoff_max_ms": BACKOFF_MAX,
    "release_backoff_multiplier": BACKOFF_MULTIPLIER,
}
CONSUMER_FIELDS: dict[str, str] = {
    "session_timeout_ms": "consumer.session.timeout.ms",
    "heartbeat_interval_ms": "consumer.heartbeat.interval.ms",
}


class InvalidGroupConfig(CoordinatorException, ValueError):
    error_code = ErrorCode.invalid_config


def _parse(definition: GroupConfigDef, value: str) -> Any:
    if definition.kind is bool:
        if value.lower() not in ("true", "false"):
            raise InvalidGroupConfig(f"{definition.name} must be true or false, not {value!r}")
        return value.lower() == "true"
    if definition.kind is int:
        try:
            return int(value)
        except ValueError:
            raise InvalidGroupConfig(
                f"{definition.name} must be an integer, not {value!r}"
            ) from None
    if definition.kind is float:
        try:
            number = float(value)
        except ValueError:
            raise InvalidGroupConfig(f"{definition.name} must be a number, not {value!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise InvalidGroupConfig(f"{definition.name} must be a finite number, not {value!r}")
        return number
    if definition.choices and value not in definition.choices:
        raise InvalidGroupConfig(
            f"{definition.name} must be one of {', '.join(definition.choices)}"
        )
    return value


class GroupConfigs:
    def __init__(self, path: Path | None, broker: Callable[[str], Any]) -> None:
        self._path = path
        self._broker = broker
        self._stored: dict[str, dict[str, str]] = {}
        # Bumped on every change, so callers may cache effective values until it moves.
        self.version = 0
        # Bumped when the broker configs behind the defaults and bounds change (dynamic
        # `group.share.*`): effective values move then too, with nothing here to save.
        self.broker_version = 0
        self._stamp = -1  # the file's mtime as last read or written here
        self._saved_version = 0  # the version last written to `path`
        if path is not None and path.exists():
            self._stamp = path.stat().st_mtime_ns
            self._stored = json.loads(path.read_text())

    def reload(self) -> bool:
        """Read the file again if another process (the controller of `--processes N`)
        replaced it since; True if it did. Unreadable: kept as it was, tried again later."""
        if self._path is None:
            return False
        try:
            stamp = self._path.stat().st_mtime_ns
            if stamp == self._stamp:
                return False
            stored = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return False
        self._stamp, self._stored = stamp, stored
        self.version += 1
        self._saved_version = self.version  # what was read is what is on disk
        return True

    def broker_changed(self) -> None:
        """The broker's defaults or bounds changed: values cached by version are stale."""
        self.broker_version += 1

    def stored(self, group_id: str) -> dict[str, str]:
        return dict(self._stored.get(group_id, {}))

    def bounds(self, name: str) -> tuple[int | float | None, int | float | None]:
        d = DEFS[name]
        return (
            self._broker(d.broker_min) if d.broker_min else None,
            self._broker(d.broker_max) if d.broker_max else None,
        )

    def validate(self, name: str, value: str) -> Any:
        """:raises InvalidGroupConfig: unknown name, bad value, or outside the broker bounds."""
        if name not in DEFS:
            raise InvalidGroupConfig(f"unknown group config {name!r}")
        d = DEFS[name]
        parsed = _parse(d, value)
        if d.check is not None:
            d.check(parsed, self._broker)
        low, high = self.bounds(name)
        if low is not None and parsed < low:
            raise InvalidGroupConfig(f"{name}={parsed} is below the broker minimum {low}")
        if high is not None and parsed > high:
            raise InvalidGroupConfig(f"{name}={parsed} is above the broker maximum {high}")
        return parsed

    def check(self, group_id: str, changes: Mapping[str, str | None]) -> None:
        """Validate a change of the group's configs as a whole (what a dry run answers).

        :raises InvalidGroupConfig: a change is invalid, or the result would leave a session
            timeout at or below its heartbeat interval.
        """
        for name, value in changes.items():
            if value is None:
                if name not in DEFS:
                    raise InvalidGroupConfig(f"unknown group config {name!r}")
            else:
                self.validate(name, value)
        merged = {**self._stored.get(group_id, {}), **changes}
        for session, heartbeat in SESSION_AND_HEARTBEAT:
            if session not in changes and heartbeat not in changes:
                continue  # as stored: checked when set, or bounds moved since (seed 002)
            session_ms, heartbeat_ms = (self._raw(n, merged.get(n)) for n in (session, heartbeat))
            if session_ms <= heartbeat_ms:
                raise InvalidGroupConfig(
                    f"{session}={session_ms} must be greater than {heartbeat}={heartbeat_ms}"
                )

    def _raw(self, name: str, value: str | None) -> Any:
        """A value as set, else its broker default: not capped (what Kafka validates)."""
        d = DEFS[name]
        if value is not None:
            return _parse(d, value)
        return self._broker(d.broker_default) if d.broker_default is not None else d.default

    def alter(self, group_id: str, changes: Mapping[str, str | None]) -> None:
        """Set (or with None, delete) configs of a group, all or nothing, and write them.

        :raises InvalidGroupConfig: on the first invalid change; nothing is stored then.
        """
        self.change(group_id, changes)
        self.save()

    def change(self, group_id: str, changes: Mapping[str, str | None]) -> None:
        """`alter` in memory only: the broker writes the change off its event loop
        (`unsaved`, `write`, `saved`) and answers once it is written.

        :raises InvalidGroupConfig: on the first invalid change; nothing is stored then.
        """
        self.check(group_id, changes)
        configs = self._stored.setdefault(group_id, {})
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = value
        if not configs:
            del self._stored[group_id]
        self.version += 1

    def delete_group(self, group_id: str) -> None:
        if self.forget_group(group_id):
            self.save()

    def forget_group(self, group_id: str) -> bool:
        """`delete_group` in memory only (see `change`); whether the group had configs."""
        if self._stored.pop(group_id, None) is None:
            return False
        self.version += 1
        return True

    def save(self) -> None:
        """Write what is unsaved, here and now (tests, offline tools)."""
        pending = self.unsaved()
        if pending is not None:
            self.write(pending[1])
            self.saved(pending[0])

    def unsaved(self) -> tuple[int, dict[str, dict[str, str]]] | None:
        """The version not yet written and a copy of the configs at it (None: nothing to
        write, or no file). A later version's copy holds every earlier change."""
        if self._path is None or self.version <= self._saved_version:
            return None
        return self.version, {group: dict(c) for group, c in self._stored.items()}

    def write(self, configs: dict[str, dict[str, str]]) -> None:
        """Write `configs` (a copy from `unsaved`) durably: tmp, fsync, rename, fsync the
        directory. Touches no state of this object: any thread may run it, one at a time (the
        JSON is made there too: 50,000 groups' took tens of milliseconds)."""
        assert self._path is not None
        atomic_write(self._path, json.dumps(configs, sort_keys=True).encode())

    def saved_through(self, version: int) -> bool:
        """Whether every change up to `version` is written."""
        return self._path is None or self._saved_version >= version

    def saved(self, version: int) -> None:
        """`version` (from `unsaved`) is written."""
        self._saved_version = max(self._saved_version, version)
        if self._path is not None:  # our own write: nothing for `reload` to read again
            self._stamp = self._path.stat().st_mtime_ns

    def effective(self, group_id: str, name: str) -> Any:
        """The value in force: the group's own if set, else the broker default; capped by bounds."""
        d = DEFS[name]
        raw = self._stored.get(group_id, {}).get(name)
        if raw is not None:
            value = _parse(d, raw)
        elif d.broker_default is not None:
            value = self._broker(d.broker_default)
        else:
            value = d.default
        low, high = self.bounds(name)
        if low is not None:
            value = max(value, low)
        if high is not None:
            value = min(value, high)
        return value

    def share(self, group_id: str) -> ShareGroupConfig:
        """The share group's configs in force (read afresh: bounds are dynamic)."""
        return ShareGroupConfig(**{f: self.effective(group_id, n) for f, n in SHARE_FIELDS.items()})

    def consumer(self, group_id: str) -> ConsumerGroupConfig:
        """The consumer group's configs in force (read afresh: bounds are dynamic)."""
        values = {f: self.effective(group_id, n) for f, n in CONSUMER_FIELDS.items()}
        return ConsumerGroupConfig(**values)

    def describe(self, group_id: str) -> list[tuple[str, str, bool]]:
        """(name, effective value as a string, set on the group?) for every group config,
        whatever kind the group is (as Kafka's DescribeConfigs lists them)."""
        stored = self._stored.get(group_id, {})
        out = []
        for name in DEFS:
            value = self.effective(group_id, name)
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out.append((name, text, name in stored))
        return out
