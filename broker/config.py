"""Broker configuration: one frozen, typed settings object under Kafka's own names.

Each Kafka name maps to a snake_case attribute (`num.partitions` -> `num_partitions`). Sources,
later ones winning: built-in defaults (sized for a laptop), a Java-style properties file,
environment variables (`SHOAL_LOG_DIRS` sets `log.dirs`: upper case, dots as underscores), and
the command line. Everything is parsed and validated when loaded (types, ranges, the
`group.share.*` bound pairs), so a bad value stops the broker at start, not at first use.
Names Shoal does not know are kept (DescribeConfigs lists them) and reported once at start,
as Kafka's "supplied but isn't a known config".

The `group.share.*` defaults and bounds, the `log.*` defaults of topic configs and the
connection limits may change at runtime (`broker.dynamic_config`): a change makes a new
`BrokerConfig` with `dataclasses.replace`, validated the same way.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import re
import socket
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from broker.authorizer import KAFKA_AUTHORIZER
from broker.authorizer import KNOWN_AUTHORIZERS
from broker.authorizer import SHOAL_AUTHORIZER
from broker.listeners import Listener
from broker.listeners import inter_node_listener
from broker.listeners import parse_address
from broker.listeners import parse_listeners
from broker.listeners import parse_protocol_map
from broker.ownership import Ownership
from coordinator.consumer_assignors import parse_assignors
from coordinator.group_configs import ACQUIRE_MODES
from coordinator.group_configs import DEFS
from storage.config import LogConfig
from storage.config import check_topic_config_values
from storage.errors import InvalidConfig

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_DAY_MS = 24 * 3600 * 1000
_WEEK_MS = 7 * _DAY_MS
# Topic config -> the broker config that is its default (Kafka's ServerTopicConfigSynonyms).
LOG_CONFIG_SYNONYMS: Mapping[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
}
_CHOICES = {
    "group.share.auto.offset.reset": ("latest", "earliest"),
    "group.share.acquire.mode": ACQUIRE_MODES,
    "ssl.client.auth": ("none", "requested", "required"),
    "ssl.keystore.type": ("PEM", "PKCS12"),
    "ssl.truststore.type": ("PEM", "PKCS12"),
}
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Shown by DescribeConfigs as null, as Kafka shows its PASSWORD-typed configs.
SENSITIVE = frozenset({"ssl.key.password", "ssl.keystore.password", "ssl.truststore.password"})


def _number(default: float, low: float | None = None, high: float | None = None) -> Any:
    """A number setting, int or float as annotated; `low`/`high` are checked when the
    settings are made (`__post_init__`: one check for both kinds)."""
    return field(default=default, metadata={"low": low, "high": high})


def _int(default: int, low: int | None = None, high: int | None = None) -> Any:
    """An int setting, with int bounds (`_number`)."""
    return _number(default, low, high)


def _ratio(default: float) -> Any:
    """A float setting between 0 and 1."""
    return _number(default, 0.0, 1.0)


def _share(default: int) -> Any:
    """A `group.share.*` int: at least 1, as the dynamic configs have always required."""
    return _int(default, 1)


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    """Every setting Shoal reads. Attribute = Kafka name with dots as underscores."""

    node_id: int = _int(1, 0)
    # `shoal serve --processes N` sets it in each of its N processes (docs/multicore.md).
    processes: int = _int(1, 1, 1024)
    listeners: str = "PLAINTEXT://127.0.0.1:9092"
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""  # over Kafka's default: each protocol to itself
    # With --processes N, the listener the processes reach each other on (transactions, topic
    # auto-creation); empty: the one named PLAINTEXT, else the first. Unused with N = 1.
    inter_broker_listener_name: str = ""
    # TLS, from PEM files as Kafka 2.7+ reads them: the keystore holds the private key and the
    # certificate chain; the truststore, the CAs that client certificates must chain to.
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""
    ssl_key_password: str = ""
    # PKCS12 stores' passwords (Kafka's names); PEM files use ssl.key.password only.
    ssl_keystore_password: str = ""
    ssl_truststore_password: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    ssl_client_auth: str = "none"
    # How the processes of `--processes N` check each other's certificate on an SSL or
    # SASL_SSL inter-node listener (Kafka's client setting): https checks the host name;
    # empty checks the chain only. Unused with N = 1 (the broker opens no TLS connection).
    ssl_endpoint_identification_algorithm: str = "https"
    # Kafka's default is GSSAPI, which Shoal lacks; PLAIN (a password on the wire) is opt-in.
    sasl_enabled_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512"
    connection_failed_authentication_delay_ms: int = _int(100, 0)
    # The largest frame a SASL listener reads before the client has logged in (Kafka's).
    sasl_server_max_receive_size: int = _int(524_288, 1)
    log_dirs: str = "./data"
    socket_request_max_bytes: int = _int(100 * 1024 * 1024, 1)
    # The most a Fetch or ShareFetch answers, whatever its MaxBytes asks (KIP-541; Kafka's
    # name, default and minimum): `KafkaApis` caps the request's MaxBytes with it.
    fetch_max_bytes: int = _int(55 * 1024 * 1024, 1024)
    # Connection limits (Kafka's SocketServer and Selector: names, defaults, semantics; see
    # broker.connection_quotas). At max.connections the listeners stop accepting until a
    # connection closes; a connection over its address's limit is closed once accepted.
    max_connections: int = _int(_INT32_MAX, 0)
    max_connections_per_ip: int = _int(_INT32_MAX, 0)  # 0 only with overrides, as Kafka
    max_connections_per_ip_overrides: str = ""  # `host:count,...`; a host name is resolved
    connections_max_idle_ms: int = _int(600_000)  # negative: never closed for idleness
    socket_listen_backlog_size: int = _int(50, 1)  # accepted by the kernel, not yet by Shoal
    queued_max_requests: int = _int(500, 1)
    auto_create_topics_enable: bool = True
    num_partitions: int = _int(1, 1)
    # Partition limits, checked before anything is created: the broker's total (KIP-578's
    # name) and what one CreateTopics or CreatePartitions request may add (Shoal's).
    max_broker_partitions: int = _int(50_000, 1)
    max_partitions_per_request: int = _int(10_000, 1)
    # Positions in the offset index are int32, so a segment cannot outgrow that.
    log_segment_bytes: int = _int(1024**3, 14, _INT32_MAX)
    log_roll_ms: int = _int(_WEEK_MS, 1)
    log_retention_ms: int = _int(_WEEK_MS, -1)  # -1: keep forever
    log_retention_bytes: int = _int(-1, -1)  # -1: no size limit
    log_retention_check_interval_ms: int = _int(300_000, 1)
    log_index_interval_bytes: int = _int(4096, 0)
    # The log cleaner (compacted topics); Kafka's names and defaults. The first four are the
    # broker defaults of cleanup.policy, delete.retention.ms, min.cleanable.dirty.ratio and
    # min.compaction.lag.ms (LOG_CONFIG_SYNONYMS).
    log_cleanup_policy: str = "delete"  # "compact", "delete" or both, comma-separated
    log_cleaner_delete_retention_ms: int = _int(_DAY_MS, 0)
    log_cleaner_min_cleanable_ratio: float = _ratio(0.5)
    log_cleaner_min_compaction_lag_ms: int = _int(0, 0)
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = _int(15_000, 1)
    # Bounds the cleaner's key map (storage.offset_map); Kafka requires more than 1 MiB per
    # cleaner thread, and Shoal has one.
    log_cleaner_dedupe_buffer_size: int = _int(128 * 1024 * 1024, 1024 * 1024 + 1)
    log_flush_interval_messages: int = _int(_INT64_MAX, 1)
    log_flush_interval_ms: int = _int(1000, 1)
    # How often each partition's recovery point (the offset below which it is synced) is
    # saved for the whole data dir, as Kafka's: a restart after a crash reads again only what
    # lies past it (storage.dir_checkpoints).
    log_flush_offset_checkpoint_interval_ms: int = _int(60_000, 1)
    # Kafka's name: threads that flush and close logs at a stop. Shoal's threads only wait on
    # fsyncs, which the disk overlaps, so it defaults higher than Kafka's 2; logs are opened
    # on the event loop, lazily, once the broker listens.
    num_recovery_threads_per_data_dir: int = _int(8, 1)
    metrics_port: int = _int(9308, -1, 65535)  # -1: no metrics endpoint
    metrics_bind_address: str = ""  # empty: the first listener's host
    # A stop's whole budget: in-flight requests are answered, then logs are closed, in this
    # time; logs still closing then are checked past their recovery points at the next start.
    shutdown_timeout_ms: int = _int(5000, 0)
    # The longest metadata string an OffsetCommit may carry (Kafka's name and default).
    offset_metadata_max_bytes: int = _int(4096, 0)
    # Committed offsets of groups without members expire this long after their commit.
    offsets_retention_minutes: int = _int(7 * 24 * 60, 1)
    offsets_retention_check_interval_ms: int = _int(600_000, 1)
    # Transactions (Kafka's names and defaults; coordinator.transaction_coordinator).
    transaction_max_timeout_ms: int = _int(900_000, 1)
    transactional_id_expiration_ms: int = _int(_WEEK_MS, 1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _int(10_000, 1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _int(3_600_000, 1)
    group_share_max_share_sessions: int = _int(2000, 1)
    # Kafka's name; empty means no persister (share state is not durable; for benchmarks).
    group_share_persister_class_name: str = "SHARE_CHECKPOINT"
    # Deltas after which the share-partition leader writes a new SHARE_CHECKPOINT.
    share_coordinator_snapshot_update_records_per_snapshot: int = _int(100, 1)
    # The share-group configs' broker defaults and bounds (KIP-932 and seed 002); dynamic.
    # coordinator.group_configs.BROKER_DEFAULTS lists the same names and defaults.
    group_share_auto_offset_reset: str = "latest"
    group_share_record_lock_duration_ms: int = _share(30_000)
    group_share_min_record_lock_duration_ms: int = _share(1_000)
    group_share_max_record_lock_duration_ms: int = _share(60_000)
    group_share_delivery_count_limit: int = _share(5)
    group_share_min_delivery_count_limit: int = _share(2)
    group_share_max_delivery_count_limit: int = _share(10)
    group_share_partition_max_record_locks: int = _share(2_000)
    group_share_min_partition_max_record_locks: int = _share(100)
    group_share_max_partition_max_record_locks: int = _share(4_000)
    group_share_renew_acknowledge_enable: bool = True
    # Defaults of the group configs share.acquire.mode (KIP-1206) and
    # share.key.ordering.enable (Shoal's key-ordered sharing); dynamic like the rest.
    group_share_acquire_mode: str = "batch_optimized"
    group_share_key_ordering_enable: bool = False
    # share.key.ordering.max.in.flight.per.key's default and bounds (Shoal's own); dynamic.
    group_share_key_ordering_max_in_flight_per_key: int = _share(1)
    group_share_min_key_ordering_max_in_flight_per_key: int = _share(1)
    group_share_max_key_ordering_max_in_flight_per_key: int = _share(100)
    group_share_session_timeout_ms: int = _share(45_000)
    group_share_min_session_timeout_ms: int = _share(45_000)
    group_share_max_session_timeout_ms: int = _share(60_000)
    group_share_heartbeat_interval_ms: int = _share(5_000)
    group_share_min_heartbeat_interval_ms: int = _share(5_000)
    group_share_max_heartbeat_interval_ms: int = _share(15_000)
    # Retry backoff (issue 35): the defaults and bounds of share.release.backoff.*; dynamic.
    group_share_release_backoff_initial_ms: int = _int(0, 0)
    group_share_min_release_backoff_initial_ms: int = _int(0, 0)
    group_share_max_release_backoff_initial_ms: int = _int(3_600_000, 0)
    group_share_release_backoff_max_ms: int = _int(60_000, 0)
    group_share_min_release_backoff_max_ms: int = _int(0, 0)
    group_share_max_release_backoff_max_ms: int = _int(3_600_000, 0)
    group_share_release_backoff_multiplier: float = _number(2.0, 1.0)
    group_share_min_release_backoff_multiplier: float = _number(1.0, 1.0)
    group_share_max_release_backoff_multiplier: float = _number(10.0, 1.0)
    # Kafka sizes its share-session cache with this; it never refuses a group (nor does Shoal,
    # whose cache is group.share.max.share.sessions). Accepted so Kafka configs load unchanged.
    group_share_max_groups: int = _share(10)
    group_share_max_size: int = _share(200)
    # KIP-1191: a share group's dead-letter topic must start with this ("": any name); dynamic.
    errors_deadletterqueue_topic_name_prefix: str = "dlq."
    # Classic consumer groups (JoinGroup/SyncGroup), Kafka's names and defaults.
    group_min_session_timeout_ms: int = _int(6_000, 1)
    group_max_session_timeout_ms: int = _int(1_800_000, 1)
    group_max_size: int = _int(2**31 - 1, 1)
    group_initial_rebalance_delay_ms: int = _int(3_000, 0)
    # KIP-848 consumer groups (group.protocol=consumer): Kafka's names, defaults and bounds.
    group_consumer_session_timeout_ms: int = _int(45_000, 1)
    group_consumer_min_session_timeout_ms: int = _int(45_000, 1)
    group_consumer_max_session_timeout_ms: int = _int(60_000, 1)
    group_consumer_heartbeat_interval_ms: int = _int(5_000, 1)
    group_consumer_min_heartbeat_interval_ms: int = _int(5_000, 1)
    group_consumer_max_heartbeat_interval_ms: int = _int(15_000, 1)
    group_consumer_max_size: int = _int(_INT32_MAX, 1)
    # Server-side assignors, the default first; short names or Kafka's class names.
    group_consumer_assignors: str = "uniform,range"
    # Authorization: empty means none (everything allowed); Kafka's StandardAuthorizer name
    # selects Shoal's own (broker.authorizer). super.users: `User:a;User:b`.
    authorizer_class_name: str = ""
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    # Names given that Shoal does not know, as given: listed by DescribeConfigs, never read.
    unknown: Mapping[str, str] = field(default_factory=dict)
    # SHOAL_* environment variables that name no setting (a typo, most often): reported.
    unknown_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """:raises ValueError: a value out of range, a bad listener or choice, crossed bounds."""
        for f in _SETTINGS.values():
            value = getattr(self, f.name)
            if not isinstance(value, _TYPES[f.name]):
                raise ValueError(f"{_kafka_name(f)}: expected {_TYPES[f.name].__name__}")
            low, high = f.metadata.get("low"), f.metadata.get("high")
            if low is not None and value < low:
                raise ValueError(f"{_kafka_name(f)}={value} is below the minimum {low}")
            if high is not None and value > high:
                raise ValueError(f"{_kafka_name(f)}={value} is above the maximum {high}")
        for name, choices in _CHOICES.items():
            if self.by_name(name) not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}")
        if not self.log_dirs:
            raise ValueError("log.dirs is empty")
        check_log_defaults(self)
        check_listeners(self)
        check_bounds(self)
        check_consumer_group_bounds(self)
        check_connection_limits(self)
        if self.authorizer_class_name and self.authorizer_class_name not in KNOWN_AUTHORIZERS:
            raise ValueError(
                f"authorizer.class.name={self.authorizer_class_name}: Shoal provides only "
                f"{KAFKA_AUTHORIZER} (or {SHOAL_AUTHORIZER})"
            )

    @classmethod
    def load(
        cls,
        *,
        file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> BrokerConfig:
        """:raises ValueError: a value does not parse as its type or is out of range."""
        raw: dict[str, Any] = {}
        if file is not None:
            raw.update(parse_properties(file.read_text()))
        known = list(DEFAULTS) + list(RETENTION_SYNONYMS)
        known += [n for n in raw if n not in known]
        env = os.environ if environ is None else environ
        raw.update(env_overrides(env, known))
        raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
        _retention_ms(raw)
        typed: dict[str, Any] = {}
        unknown: dict[str, str] = {}
        for name, value in raw.items():
            f = _SETTINGS.get(name)
            if f is None:
                unknown[name] = str(value)
            else:
                typed[f.name] = _coerce(name, value, _TYPES[f.name])
        return cls(**typed, unknown=unknown, unknown_env=unknown_env_names(env, known))

    def replace(self, changes: Mapping[str, Any]) -> BrokerConfig:
        """A copy with some known settings (by Kafka name, typed values) changed.

        :raises ValueError: the result is invalid (out of range, crossed bounds).
        """
        return dataclasses.replace(self, **{_SETTINGS[n].name: v for n, v in changes.items()})

    def by_name(self, name: str) -> int | str | bool:
        """A setting by its Kafka name, for tables keyed by name (DEFS, DescribeConfigs).

        :raises KeyError: no such setting, known or supplied."""
        f = _SETTINGS.get(name)
        value: int | str | bool = self.unknown[name] if f is None else getattr(self, f.name)
        return value

    @property
    def values(self) -> dict[str, int | str | bool]:
        """Every setting by Kafka name, unknown ones included."""
        known = {name: self.by_name(name) for name in _SETTINGS}
        return {**self.unknown, **known}

    @property
    def listener(self) -> tuple[str, int]:
        """Host and port of the first listener."""
        first = self.listener_list[0]
        return first.host, first.port

    @property
    def listener_list(self) -> list[Listener]:
        return parse_listeners(
            self.listeners, parse_protocol_map(self.listener_security_protocol_map)
        )

    @property
    def advertised_list(self) -> list[Listener]:
        protocol_map = parse_protocol_map(self.listener_security_protocol_map)
        return (
            parse_listeners(self.advertised_listeners, protocol_map)
            if self.advertised_listeners
            else []
        )

    @property
    def inter_node_listener(self) -> Listener:
        """The listener other processes of `--processes N` send their requests to.

        :raises ValueError: inter.broker.listener.name names no listener."""
        return inter_node_listener(self.listener_list, self.inter_broker_listener_name)

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        return tuple(m.strip() for m in self.sasl_enabled_mechanisms.split(",") if m.strip())

    @property
    def advertised(self) -> tuple[str, int]:
        """What Metadata tells clients of the first listener; a wildcard listener advertises
        this host's name."""
        adv = self.advertised_listeners
        host, port = parse_address(adv.split(",")[0]) if adv else self.listener
        if host in ("0.0.0.0", "::"):
            host = socket.getfqdn()
        return host, port

    @property
    def data_dir(self) -> Path:
        return Path(self.log_dirs.split(",")[0])

    @property
    def ownership(self) -> Ownership:
        """This process's share of the partitions and groups (everything when processes=1)."""
        return Ownership(self.node_id, self.processes)

    @property
    def node_dir(self) -> Path:
        """Where this process's private files live (the data dir itself when processes=1)."""
        return self.ownership.node_dir(self.data_dir)


def _kafka_name(f: dataclasses.Field[Any]) -> str:
    return f.name.replace("_", ".")


_TYPES: dict[str, type] = {
    name: hint
    for name, hint in typing.get_type_hints(BrokerConfig).items()
    if hint in (int, str, bool, float)
}
# Kafka name -> field, for every setting (not `unknown`).
_SETTINGS: dict[str, dataclasses.Field[Any]] = {
    _kafka_name(f): f for f in dataclasses.fields(BrokerConfig) if f.name in _TYPES
}
# Kafka name -> (default, type), as DescribeConfigs and the dynamic configs need them.
DEFAULTS: dict[str, tuple[Any, type]] = {
    name: (f.default, _TYPES[f.name]) for name, f in _SETTINGS.items()
}


def log_config(config: BrokerConfig) -> LogConfig:
    """The broker-level defaults of the topics' log settings (a topic's own configs win)."""
    synonyms = {topic: str(config.by_name(name)) for topic, name in LOG_CONFIG_SYNONYMS.items()}
    return LogConfig().with_overrides(synonyms)


def check_log_defaults(config: BrokerConfig) -> None:
    """:raises ValueError: `log.cleanup.policy` is not a list of compact and delete, or the
    cleanable ratio is not a number."""
    if not math.isfinite(config.log_cleaner_min_cleanable_ratio):
        raise ValueError("log.cleaner.min.cleanable.ratio must be between 0 and 1")
    try:
        check_topic_config_values({"cleanup.policy": config.log_cleanup_policy})
    except InvalidConfig as e:
        raise ValueError(str(e).replace("cleanup.policy", "log.cleanup.policy")) from None


def check_listeners(config: BrokerConfig) -> None:
    """:raises ValueError: a bad listener, a TLS listener without a keystore, client
    authentication without a truststore, an unknown SASL mechanism."""
    listeners = config.listener_list
    config.advertised_list  # noqa: B018  # parsed for its errors
    if any(lst.tls for lst in listeners) and not config.ssl_keystore_location:
        raise ValueError("an SSL or SASL_SSL listener needs ssl.keystore.location")
    if config.ssl_client_auth != "none" and not config.ssl_truststore_location:
        raise ValueError(f"ssl.client.auth={config.ssl_client_auth} needs ssl.truststore.location")
    if config.ssl_endpoint_identification_algorithm.strip().lower() not in ("", "https"):
        raise ValueError(
            "ssl.endpoint.identification.algorithm must be https (check the host name) or empty"
        )
    unknown = set(config.sasl_mechanisms) - set(SASL_MECHANISMS)
    if unknown:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(sorted(unknown))} not supported")
    if any(lst.sasl for lst in listeners) and not config.sasl_mechanisms:
        raise ValueError("a SASL listener needs sasl.enabled.mechanisms")


def check_bounds(config: BrokerConfig) -> None:
    """:raises ValueError: the broker default of a group config (`group.share.*`,
    `group.consumer.*`) lies outside its bounds, or min > max."""
    for d in DEFS.values():
        if d.broker_default is None or d.broker_min is None or d.broker_max is None:
            continue
        low, default, high = (
            config.by_name(d.broker_min),
            config.by_name(d.broker_default),
            config.by_name(d.broker_max),
        )
        if not float(low) <= float(default) <= float(high):
            raise ValueError(
                f"{d.broker_default}={default} must lie within "
                f"{d.broker_min}={low} and {d.broker_max}={high}"
            )


def check_consumer_group_bounds(config: BrokerConfig) -> None:
    """:raises ValueError: a heartbeat interval not below the session timeout (as Kafka
    requires), an unknown assignor. Its defaults' bounds are `check_bounds`'s."""
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
        raise ValueError(
            "group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms"
        )
    parse_assignors(config.group_consumer_assignors)


_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def parse_ip_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,...`, a host being an address or a name
    (an IPv6 address keeps its colons: the count follows the last one).

    :raises ValueError: an entry without a count, a count below 0, a host that is neither.
    """
    overrides: dict[str, int] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            if not all(_HOST_LABEL.fullmatch(label) for label in host.split(".")):
                raise ValueError(
                    f"max.connections.per.ip.overrides contains invalid addresses : {host}"
                ) from None
        overrides[host] = int(count)
    return overrides


def check_connection_limits(config: BrokerConfig) -> None:
    """Kafka's own checks (KafkaConfig.validateValues).

    :raises ValueError: a bad override, max.connections.per.ip=0 without overrides, a failed
        login answered no sooner than an idle connection is closed."""
    overrides = parse_ip_overrides(config.max_connections_per_ip_overrides)
    if config.max_connections_per_ip == 0 and not overrides:
        raise ValueError(
            "max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set."
        )
    delay = config.connection_failed_authentication_delay_ms
    if 0 <= config.connections_max_idle_ms <= delay:
        raise ValueError(
            f"connection.failed.authentication.delay.ms={delay} should always be less than "
            f"connections.max.idle.ms={config.connections_max_idle_ms}"
        )


def parse_properties(text: str) -> dict[str, str]:
    """The subset of Java's properties syntax that Kafka's config files use."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[line] = ""
            continue
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


# SHOAL_* variables read by something other than the config (the event loop, the benchmark,
# the wire fuzzer of `make fuzz`).
NOT_SETTINGS_ENV = ("SHOAL_LOOP",)
NOT_SETTINGS_ENV_PREFIXES = ("SHOAL_BENCH_", "SHOAL_FUZZ_")


# Kafka's coarser names for log.retention.ms, honoured (not reported as unknown); they stay
# listed as supplied (DescribeConfigs) but only log.retention.ms is used, and changed at runtime.
RETENTION_SYNONYMS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000}


def _retention_ms(raw: dict[str, Any]) -> None:
    """Kafka's precedence (`KafkaConfig.logRetentionTimeMillis`): log.retention.ms, else
    log.retention.minutes, else log.retention.hours; negative means -1 (keep forever).

    :raises ValueError: a synonym given is not an integer.
    """
    values = {}
    for name in RETENTION_SYNONYMS:
        if name in raw:
            try:
                values[name] = int(str(raw[name]).strip())
            except ValueError:
                raise ValueError(f"{name}={raw[name]!r}: expected an integer") from None
    if "log.retention.ms" in raw or not values:
        return
    name = next(n for n in RETENTION_SYNONYMS if n in values)  # minutes before hours
    ms = values[name] * RETENTION_SYNONYMS[name]
    raw["log.retention.ms"] = -1 if ms < 0 else ms


def unknown_env_names(environ: Mapping[str, str], names: list[str]) -> tuple[str, ...]:
    """SHOAL_* variables that set nothing: neither a setting nor read elsewhere."""
    settings = {"SHOAL_" + name.upper().replace(".", "_") for name in names}
    return tuple(
        sorted(
            key
            for key in environ
            if key.startswith("SHOAL_")
            and key not in settings
            and key not in NOT_SETTINGS_ENV
            and not key.startswith(NOT_SETTINGS_ENV_PREFIXES)
        )
    )


def env_overrides(environ: Mapping[str, str], names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        key = "SHOAL_" + name.upper().replace(".", "_")
        if key in environ:
            out[name] = environ[key]
    return out


def _coerce(name: str, value: Any, kind: type) -> Any:
    if kind is bool and isinstance(value, str):
        if value.lower() not in ("true", "false"):
            raise ValueError(f"{name}: expected true or false, got {value!r}")
        return value.lower() == "true"
    if kind in (int, float) and isinstance(value, bool):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    try:
        return kind(value)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
