"""The typed broker settings: names, sources, validation, and the dynamic `group.share.*` layer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from broker.config import DEFAULTS
from broker.config import BrokerConfig
from broker.config import log_config
from broker.dynamic_config import FILE_NAME
from broker.dynamic_config import DynamicBrokerConfigs
from broker.dynamic_config import InvalidBrokerConfig
from broker.main import first_listener_at
from broker.server import Server
from coordinator.group_configs import BROKER_DEFAULTS


def test_kafka_names_map_to_typed_attributes() -> None:
    config = BrokerConfig.load(environ={})
    assert config.num_partitions == 1 and config.by_name("num.partitions") == 1
    assert config.auto_create_topics_enable is True
    assert config.group_share_record_lock_duration_ms == 30_000
    assert config.values["log.dirs"] == "./data"


def test_named_listeners_and_their_security_protocols() -> None:
    config = BrokerConfig.load(
        environ={},
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://:9093,SASL_PLAINTEXT://h:9094",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "advertised.listeners": "INTERNAL://broker.internal:19093",
        },
    )
    assert [(x.name, x.security_protocol, x.host, x.port) for x in config.listener_list] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
        ("INTERNAL", "SASL_PLAINTEXT", "0.0.0.0", 9093),
        ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "h", 9094),
    ]
    assert [(a.name, a.host, a.port) for a in config.advertised_list] == [
        ("INTERNAL", "broker.internal", 19093)
    ]


def test_the_command_line_moves_only_the_first_listener() -> None:
    listeners = "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093"
    assert first_listener_at(listeners, "0.0.0.0", 19092) == (
        "PLAINTEXT://0.0.0.0:19092,SASL_SSL://0.0.0.0:9093"
    )


def test_the_group_share_defaults_agree_with_the_coordinator() -> None:
    for name, default in BROKER_DEFAULTS.items():
        assert DEFAULTS[name] == default, name


def test_file_then_environment_then_command_line(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# a comment\nnum.partitions=3\nlog.retention.ms: 1000\nmetrics.port=1\n")
    config = BrokerConfig.load(
        file=props,
        environ={"SHOAL_LOG_RETENTION_MS": "2000", "SHOAL_METRICS_PORT": "2"},
        overrides={"metrics.port": 3, "node.id": None},
    )
    assert (config.num_partitions, config.log_retention_ms, config.metrics_port) == (3, 2000, 3)
    assert config.node_id == 1  # None: not given on the command line


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("num.partitions", "many", "num.partitions"),
        ("num.partitions", "0", "below the minimum 1"),
        ("log.segment.bytes", str(2**31), "above the maximum"),
        ("metrics.port", "-2", "below the minimum -1"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("group.share.auto.offset.reset", "middle", "latest, earliest"),
        ("group.share.acquire.mode", "fastest", "batch_optimized, record_limit"),
        ("group.share.key.ordering.enable", "maybe", "true or false"),
        ("listeners", "PLAINTEXT://nowhere", "no port"),
        ("listeners", "PLAINTEXT://127.0.0.1:65536", "no port"),
        ("advertised.listeners", "PLAINTEXT://host", "no port"),
        ("listeners", "SASL_SSL://127.0.0.1:9093", "needs ssl.keystore.location"),
        ("listeners", "INTERNAL://127.0.0.1:9093", "not in listener.security.protocol.map"),
        ("listeners", "SSL://:1,SSL://:2", "named twice"),
        ("listener.security.protocol.map", "INTERNAL:TLS", "bad entry"),
        ("sasl.enabled.mechanisms", "GSSAPI", "GSSAPI not supported"),
        ("ssl.client.auth", "required", "needs ssl.truststore.location"),
        ("ssl.client.auth", "sometimes", "none, requested, required"),
        ("ssl.keystore.type", "JKS", "PEM"),
        ("group.share.record.lock.duration.ms", "500", "must lie within"),
        ("group.share.max.delivery.count.limit", "3", "must lie within"),
    ],
)
def test_bad_values_stop_the_broker_at_start(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BrokerConfig.load(environ={}, overrides={name: value})


def test_unknown_names_are_kept_and_reported_once_at_start(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\nno.such.thing=1\nlog.dirz=/x\n")
    config = BrokerConfig.load(
        file=props, environ={}, overrides={"log.dirs": str(tmp_path / "data")}
    )
    assert config.unknown == {"no.such.thing": "1", "log.dirz": "/x"}
    assert config.by_name("no.such.thing") == "1" and config.values["log.dirz"] == "/x"
    with capture_logs() as logs:
        Server(config).services.logs.close()
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["event"], e["names"]) for e in warnings] == [
        ("supplied but isn't a known config", ["log.dirz", "no.such.thing"])
    ]


def test_settings_are_frozen() -> None:
    config = BrokerConfig.load(environ={})
    with pytest.raises(AttributeError):
        config.num_partitions = 2  # type: ignore[misc]


def _dynamic(tmp_path: Path, **overrides: object) -> DynamicBrokerConfigs:
    return DynamicBrokerConfigs(
        BrokerConfig.load(environ={}, overrides={"log.dirs": str(tmp_path), **overrides})
    )


def test_a_dynamic_change_replaces_the_settings_and_survives_a_restart(tmp_path: Path) -> None:
    dynamic = _dynamic(tmp_path)
    before = dynamic.current
    dynamic.alter({"group.share.max.record.lock.duration.ms": "40000"})
    assert dynamic.current.group_share_max_record_lock_duration_ms == 40_000
    assert before.group_share_max_record_lock_duration_ms == 60_000  # frozen, not changed
    again = _dynamic(tmp_path)
    assert again.current.group_share_max_record_lock_duration_ms == 40_000
    again.alter({"group.share.max.record.lock.duration.ms": None})
    assert again.current.group_share_max_record_lock_duration_ms == 60_000
    assert again.stored == {}


def test_dynamic_changes_are_checked_like_the_file(tmp_path: Path) -> None:
    dynamic = _dynamic(tmp_path)
    for change in (
        {"listeners": "PLAINTEXT://:1"},
        {"log.retention.ms": "-2"},
        {"log.segment.bytes": "13"},
        {"no.such.config": "1"},
        {"group.share.max.delivery.count.limit": "x"},
        {"group.share.max.delivery.count.limit": "3"},  # the default 5 would lie above it
    ):
        with pytest.raises(InvalidBrokerConfig):
            dynamic.alter(change)
    dynamic.alter({"group.share.max.delivery.count.limit": "8"}, validate_only=True)
    dynamic.alter({"log.retention.ms": "1000"}, validate_only=True)
    assert dynamic.current.group_share_max_delivery_count_limit == 10
    assert dynamic.current.log_retention_ms == 7 * 24 * 3600 * 1000
    assert not (tmp_path / FILE_NAME).exists()


def test_stored_values_that_no_longer_fit_are_ignored(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text(
        json.dumps(
            {
                # A pair that only fits together: applied together.
                "group.share.min.heartbeat.interval.ms": "6000",
                "group.share.heartbeat.interval.ms": "7000",
                # Below the file's default (30000) now: dropped, with a warning.
                "group.share.max.record.lock.duration.ms": "20000",
                "log.dirs": "/elsewhere",
            }
        )
    )
    with capture_logs() as logs:
        dynamic = _dynamic(tmp_path)
    assert dynamic.current.group_share_heartbeat_interval_ms == 7000
    assert dynamic.current.group_share_min_heartbeat_interval_ms == 6000
    assert dynamic.current.group_share_max_record_lock_duration_ms == 60_000
    assert sorted(dynamic.stored) == [
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
    ]
    assert sorted(e["name"] for e in logs) == [
        "group.share.max.record.lock.duration.ms",
        "log.dirs",
    ]


def test_a_dynamic_log_config_wins_over_the_file_and_reaches_listeners(tmp_path: Path) -> None:
    dynamic = _dynamic(tmp_path, **{"log.retention.ms": 5000})
    seen: list[BrokerConfig] = []
    dynamic.on_change(seen.append)
    dynamic.alter({"log.retention.ms": "-1", "log.segment.bytes": "2048"})
    assert [(c.log_retention_ms, c.log_segment_bytes) for c in seen] == [(-1, 2048)]
    again = _dynamic(tmp_path, **{"log.retention.ms": 5000})
    logs = log_config(again.current)
    assert (logs.retention_ms, logs.segment_bytes) == (-1, 2048)
    again.alter({"log.retention.ms": None})
    assert again.current.log_retention_ms == 5000  # back to the file's value


def test_the_cleaners_topic_configs_default_to_kafkas_broker_configs() -> None:
    """log.cleanup.policy, log.cleaner.delete.retention.ms, log.cleaner.min.cleanable.ratio
    and log.cleaner.min.compaction.lag.ms: Kafka's defaults, and a topic's defaults follow them."""
    defaults = log_config(BrokerConfig.load(environ={}))
    assert (
        defaults.cleanup_policy,
        defaults.delete_retention_ms,
        defaults.min_cleanable_dirty_ratio,
        defaults.min_compaction_lag_ms,
    ) == ("delete", 86_400_000, 0.5, 0)
    config = BrokerConfig.load(
        environ={"SHOAL_LOG_CLEANER_MIN_CLEANABLE_RATIO": "0.25"},
        overrides={
            "log.cleanup.policy": "compact,delete",
            "log.cleaner.delete.retention.ms": "1000",
            "log.cleaner.min.compaction.lag.ms": "60000",
        },
    )
    logs = log_config(config)
    assert logs.compact and logs.delete
    assert (logs.delete_retention_ms, logs.min_cleanable_dirty_ratio) == (1000, 0.25)
    assert logs.min_compaction_lag_ms == 60_000
    assert logs.with_overrides({"cleanup.policy": "delete"}).cleanup_policy == "delete"
    assert config.log_cleaner_dedupe_buffer_size == 128 * 1024 * 1024


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("log.cleanup.policy", "compress"),
        ("log.cleanup.policy", ""),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("log.cleaner.min.cleanable.ratio", "nan"),
        ("log.cleaner.min.cleanable.ratio", "half"),
        ("log.cleaner.delete.retention.ms", "-1"),
        ("log.cleaner.min.compaction.lag.ms", "-5"),
        ("log.cleaner.dedupe.buffer.size", str(1024 * 1024)),  # Kafka: more than 1 MiB
    ],
)
def test_bad_cleaner_defaults_stop_the_broker_and_are_refused_dynamically(
    tmp_path: Path, name: str, value: str
) -> None:
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        BrokerConfig.load(environ={}, overrides={name: value})
    with pytest.raises(InvalidBrokerConfig):
        _dynamic(tmp_path).alter({name: value})


def test_cleaner_defaults_are_dynamic_as_in_kafka(tmp_path: Path) -> None:
    dynamic = _dynamic(tmp_path)
    seen: list[BrokerConfig] = []
    dynamic.on_change(seen.append)
    dynamic.alter(
        {
            "log.cleanup.policy": "compact",
            "log.cleaner.min.cleanable.ratio": "0.1",
            "log.cleaner.dedupe.buffer.size": str(64 * 1024 * 1024),
        }
    )
    logs = log_config(seen[-1])
    assert logs.compact and logs.min_cleanable_dirty_ratio == 0.1
    again = _dynamic(tmp_path)  # stored, and still in force after a restart
    assert again.current.log_cleanup_policy == "compact"
    assert again.current.log_cleaner_dedupe_buffer_size == 64 * 1024 * 1024


@pytest.mark.parametrize(
    ("given", "env", "expected_ms"),
    [
        ({"log.retention.hours": "2"}, {}, 2 * 3_600_000),
        ({"log.retention.minutes": "30", "log.retention.hours": "2"}, {}, 30 * 60_000),
        ({"log.retention.ms": "5000", "log.retention.minutes": "30"}, {}, 5000),
        ({"log.retention.hours": "2"}, {"SHOAL_LOG_RETENTION_MINUTES": "3"}, 3 * 60_000),
        ({"log.retention.hours": "-1"}, {}, -1),
        ({}, {}, 7 * 24 * 3_600_000),
    ],
)
def test_retention_hours_and_minutes_with_kafkas_precedence(
    tmp_path: Path, given: dict[str, str], env: dict[str, str], expected_ms: int
) -> None:
    """log.retention.ms, else log.retention.minutes, else log.retention.hours; negative is -1
    (`KafkaConfig.logRetentionTimeMillis`, apache/kafka). Honoured, so not reported unknown."""
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in given.items()))
    config = BrokerConfig.load(file=props, environ=env, overrides={"log.dirs": str(tmp_path)})
    assert config.log_retention_ms == expected_ms
    assert log_config(config).retention_ms == expected_ms
    assert config.unknown_env == ()
    with capture_logs() as logs:
        Server(config).services.logs.close()
    assert not [e for e in logs if e["event"] == "supplied but isn't a known config"], logs


def test_a_retention_synonym_that_is_not_a_number_stops_the_broker(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"log\.retention\.hours"):
        BrokerConfig.load(environ={}, overrides={"log.retention.hours": "a week"})
