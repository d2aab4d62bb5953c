"""Dynamic broker configs: settings an operator changes at runtime, without a restart.

Kafka lets an operator change some broker configs without a restart (`kafka-configs.sh
--entity-type brokers`). In Shoal the dynamic ones are:

- the share-group configs' broker defaults and bounds (`group.share.*`), read afresh wherever
  they are used;
- the cluster-wide log configs that are the broker-level defaults of topic configs
  (`log.retention.ms`, `log.segment.bytes`, ...: `LOG_CONFIG_SYNONYMS`). Every existing log
  follows a change at once, under its topic's own overrides, as Kafka's DynamicLogConfig;
- the log cleaner's `log.cleaner.dedupe.buffer.size`, read at each pass (as Kafka's
  LogCleaner reconfigures);
- the connection limits `max.connections`, `max.connections.per.ip` and
  `max.connections.per.ip.overrides` (Kafka's DynamicConnectionQuota, KIP-402): read at each
  accept; a lower `max.connections` closes the least recently active connections over it, a
  higher one lets waiting connections in (`broker.connection_quotas`).

Changes are stored in `<data dir>/dynamic-broker-configs.json` and win over the properties
file, the environment and the command line, as Kafka's dynamic configs win over
`server.properties`. Deleting one goes back to its static value. A single broker has no other
broker to differ from, so its node id and the cluster default ("") name the same settings.

Refusals follow Kafka: a broker config that is not dynamic is INVALID_REQUEST with Kafka's
"Cannot update these configs dynamically" (what its ConfigAdminManager answers); an unknown
name, which Kafka keeps for plugins that Shoal does not have, and a bad value are
INVALID_CONFIG.

Seed 002: changing a bound does not re-validate group configs already stored; their effective
values are capped by the new bounds when read. A change must keep each bound pair consistent
(min <= default <= max), as Kafka checks at startup.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any

import structlog
from kio.schema.errors import ErrorCode

from broker.config import DEFAULTS
from broker.config import LOG_CONFIG_SYNONYMS
from broker.config import BrokerConfig
from broker.errors import BrokerException
from coordinator.group_configs import ACQUIRE_MODES
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import DEFS
from coordinator.group_configs import STATIC_BROKER_CONFIGS
from storage.fsutil import atomic_write

log = structlog.get_logger("shoal.config")

FILE_NAME = "dynamic-broker-configs.json"
CLEANER_CONFIGS = frozenset({"log.cleaner.dedupe.buffer.size"})
CONNECTION_QUOTA_CONFIGS = frozenset(
    {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"}
)
DYNAMIC: frozenset[str] = (
    (frozenset(BROKER_DEFAULTS) - STATIC_BROKER_CONFIGS)
    | frozenset(LOG_CONFIG_SYNONYMS.values())
    | CLEANER_CONFIGS
    | CONNECTION_QUOTA_CONFIGS
)
_CHOICES = {
    "group.share.auto.offset.reset": ("latest", "earliest"),
    "group.share.acquire.mode": ACQUIRE_MODES,
}


class InvalidBrokerConfig(BrokerException, ValueError):
    """A dynamic broker config change is refused (unknown, read-only, bad value)."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.invalid_config) -> None:
        super().__init__(message)
        self.error_code = error_code


def parse(name: str, value: str) -> Any:
    """:raises InvalidBrokerConfig: the value does not fit the config's type."""
    kind = DEFAULTS[name][1]
    if kind is bool:
        if value.lower() not in ("true", "false"):
            raise InvalidBrokerConfig(f"{name} must be true or false, not {value!r}")
        return value.lower() == "true"
    if kind is int:
        try:
            number = int(value)
        except ValueError:
            raise InvalidBrokerConfig(f"{name} must be an integer, not {value!r}") from None
        return number  # its range is BrokerConfig's, checked when the change is applied
    if kind is float:
        try:
            return float(value)
        except ValueError:
            raise InvalidBrokerConfig(f"{name} must be a number, not {value!r}") from None
    if name in _CHOICES and value not in _CHOICES[name]:
        raise InvalidBrokerConfig(f"{name} must be one of {', '.join(_CHOICES[name])}")
    return value


def _replace(config: BrokerConfig, changes: Mapping[str, Any]) -> BrokerConfig:
    """:raises InvalidBrokerConfig: the changed settings are invalid (crossed bounds)."""
    try:
        return config.replace(changes)
    except ValueError as e:
        raise InvalidBrokerConfig(str(e)) from None


# Applied together: max.connections.per.ip may be 0 only with overrides.
_PER_IP = "max.connections.per.ip"


def _units(names: Iterable[str]) -> list[list[str]]:
    """`names` grouped by the group config whose default and bounds they are (and the per-IP
    limit with its overrides)."""
    units: dict[str, list[str]] = {}
    for name in names:
        owner = next(
            (
                d.name
                for d in DEFS.values()
                if name in (d.broker_default, d.broker_min, d.broker_max)
            ),
            _PER_IP if name.startswith(_PER_IP) else name,
        )
        units.setdefault(owner, []).append(name)
    return list(units.values())


class DynamicBrokerConfigs:
    """The dynamic configs of one broker; `current` is the settings in force."""

    def __init__(self, config: BrokerConfig) -> None:
        self._static = config
        self.current = config
        self._listeners: list[Callable[[BrokerConfig], None]] = []
        self._path = config.data_dir / FILE_NAME
        self.stored: dict[str, str] = {}
        self._stamp = self._mtime()
        if self._path.exists():
            self._load()

    def _mtime(self) -> int:
        try:
            return self._path.stat().st_mtime_ns
        except OSError:
            return -1

    def reload(self) -> bool:
        """Read the file again if another process (the controller of `--processes N`)
        replaced it since, and tell the listeners; True if it did."""
        stamp = self._mtime()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        self.current, self.stored = self._static, {}
        self._load()
        for listener in self._listeners:
            listener(self.current)
        return True

    def on_change(self, listener: Callable[[BrokerConfig], None]) -> None:
        """Call `listener` with the new settings after each change (the logs follow them)."""
        self._listeners.append(listener)

    def current_value(self, name: str) -> int | str | bool:
        """A setting in force, by Kafka name (what group configs are bounded by)."""
        return self.current.by_name(name)

    def _load(self) -> None:
        try:
            stored = json.loads(self._path.read_text())
        except (OSError, ValueError) as e:
            log.warning("unreadable dynamic broker configs", path=str(self._path), error=str(e))
            return
        parsed: dict[str, Any] = {}
        for name, value in stored.items():
            try:
                if name not in DYNAMIC:
                    raise InvalidBrokerConfig(f"{name} is not a dynamic broker config")
                parsed[name] = parse(name, str(value))
            except InvalidBrokerConfig as e:
                log.warning("ignoring stored dynamic broker config", name=name, error=str(e))
        # A default and its bounds are applied together (they may only fit as a set); a set
        # that no longer fits the properties file is dropped whole, the others still apply.
        for unit in _units(parsed):
            try:
                self.current = _replace(self.current, {n: parsed[n] for n in unit})
            except InvalidBrokerConfig as e:
                for name in unit:
                    log.warning("ignoring stored dynamic broker config", name=name, error=str(e))
                continue
            self.stored.update({name: str(stored[name]) for name in unit})

    def alter(self, changes: Mapping[str, str | None], *, validate_only: bool = False) -> None:
        """Set (None: back to the static value) dynamic configs, all or nothing.

        :raises InvalidBrokerConfig: unknown or read-only name, bad value, inconsistent bounds.
        """
        _check_names(changes)
        values = {
            name: self._static.by_name(name) if value is None else parse(name, value)
            for name, value in changes.items()
        }
        changed = _replace(self.current, values)
        if validate_only:
            return
        stored = {k: v for k, v in self.stored.items() if k not in changes}
        stored.update({k: v for k, v in changes.items() if v is not None})
        atomic_write(self._path, json.dumps(stored, sort_keys=True, indent=1).encode())
        self.stored = stored
        self.current = changed
        log.info("dynamic broker configs changed", changes=dict(changes))
        for listener in self._listeners:
            listener(changed)


def _check_names(names: Iterable[str]) -> None:
    """:raises InvalidBrokerConfig: a name Shoal does not know, or one that is not dynamic."""
    unknown = sorted(n for n in names if n not in DEFAULTS)
    if unknown:
        raise InvalidBrokerConfig(f"Unknown broker config name(s): {', '.join(unknown)}")
    static = sorted(n for n in names if n not in DYNAMIC)
    if static:
        raise InvalidBrokerConfig(
            f"Cannot update these configs dynamically: Set({', '.join(static)})",
            ErrorCode.invalid_request,
        )
