"""KIP-848 consumer groups' configs in the group config table, by Kafka's `GroupConfig`
(group-coordinator/.../GroupConfig.java, 4.1/4.2): `consumer.session.timeout.ms` and
`consumer.heartbeat.interval.ms`, each within the broker's `group.consumer.min/max.*` when set,
the session timeout above the heartbeat interval (`validateValues`, over the group's values and
the broker defaults), capped by the bounds in force when read (seed 002)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.dynamic_config import DYNAMIC
from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import STATIC_BROKER_CONFIGS
from coordinator.group_configs import GroupConfigs
from coordinator.group_configs import InvalidGroupConfig

SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def _configs(**broker: Any) -> tuple[GroupConfigs, dict[str, Any]]:
    """Group configs over broker settings (Kafka's defaults, `broker` changed by the test)."""
    values = {name: default for name, (default, _) in BROKER_DEFAULTS.items()}
    values.update({k.replace("_", "."): v for k, v in broker.items()})
    return GroupConfigs(None, values.__getitem__), values


def test_set_within_the_broker_bounds_and_read_back() -> None:
    configs, _ = _configs()
    assert (configs.effective("g", SESSION), configs.effective("g", HEARTBEAT)) == (45_000, 5_000)
    configs.alter("g", {SESSION: "50000", HEARTBEAT: "8000"})
    assert (configs.effective("g", SESSION), configs.effective("g", HEARTBEAT)) == (50_000, 8_000)
    assert configs.effective("other", SESSION) == 45_000
    rows = {name: (value, own) for name, value, own in configs.describe("other")}
    assert rows[SESSION] == ("45000", False) and rows[HEARTBEAT] == ("5000", False)
    configs.alter("g", {SESSION: None})
    assert configs.stored("g") == {HEARTBEAT: "8000"}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (SESSION, "44999", "below the broker minimum 45000"),
        (SESSION, "60001", "above the broker maximum 60000"),
        (HEARTBEAT, "4999", "below the broker minimum 5000"),
        (HEARTBEAT, "15001", "above the broker maximum 15000"),
        (SESSION, "soon", "must be an integer"),
        ("consumer.assignment.interval.ms", "1000", "unknown group config"),  # Kafka 4.3's
    ],
)
def test_outside_the_bounds_is_refused_and_nothing_stored(
    name: str, value: str, message: str
) -> None:
    configs, _ = _configs()
    with pytest.raises(InvalidGroupConfig, match=message):
        configs.alter("g", {name: value})
    with pytest.raises(InvalidGroupConfig, match=message):
        configs.check("g", {name: value})  # a dry run answers the same
    assert configs.stored("g") == {}


@pytest.mark.parametrize("kind", ["consumer", "share"])
def test_the_session_timeout_must_exceed_the_heartbeat_interval(kind: str) -> None:
    session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
    configs, _ = _configs(
        **{f"group.{kind}.min.session.timeout.ms": 1000, f"group.{kind}.session.timeout.ms": 9000}
    )
    configs.alter("g", {heartbeat: "8000"})  # below the broker's session timeout: fine
    with pytest.raises(InvalidGroupConfig, match="must be greater than"):
        configs.alter("g", {session: "8000"})  # against the group's own heartbeat interval
    with pytest.raises(InvalidGroupConfig, match="must be greater than"):
        configs.alter("h", {heartbeat: "9000"})  # against the broker's session timeout
    with pytest.raises(InvalidGroupConfig, match="must be greater than"):
        configs.alter("h", {session: "6000", heartbeat: "6000"})
    assert configs.stored("g") == {heartbeat: "8000"} and configs.stored("h") == {}
    configs.alter("g", {session: "8001"})


def test_stored_values_are_capped_by_bounds_changed_since() -> None:
    configs, broker = _configs()
    configs.alter("g", {SESSION: "58000"})
    broker["group.consumer.max.session.timeout.ms"] = 50_000
    assert configs.effective("g", SESSION) == 50_000
    assert configs.stored("g") == {SESSION: "58000"}


def test_the_broker_bounds_stay_static_as_in_kafka() -> None:
    """Every GroupCoordinatorConfig setting is static in Kafka: group.consumer.* cannot be
    altered at runtime (the share ones are dynamic in Shoal, seed 002)."""
    names = {
        f"group.consumer.{bound}{name}"
        for bound in ("", "min.", "max.")
        for name in ("session.timeout.ms", "heartbeat.interval.ms")
    }
    assert names == STATIC_BROKER_CONFIGS
    assert not STATIC_BROKER_CONFIGS & DYNAMIC
    assert "group.share.session.timeout.ms" in DYNAMIC
