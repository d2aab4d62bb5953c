"""KIP-1191's configs: the group's dead-letter topic, the topic's opt-in, the broker's prefix."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import DLQ_COPY_RECORD
from coordinator.group_configs import DLQ_TOPIC
from coordinator.group_configs import GroupConfigs
from coordinator.group_configs import InvalidGroupConfig
from storage.config import DLQ_GROUP_ENABLE
from storage.config import check_topic_config_names
from storage.config import check_topic_config_values
from storage.config import dlq_enabled
from storage.errors import InvalidConfig


def _configs(**broker: Any) -> GroupConfigs:
    values = {name: default for name, (default, _) in BROKER_DEFAULTS.items()}
    values.update({k.replace("_", "."): v for k, v in broker.items()})
    return GroupConfigs(None, values.__getitem__)


def test_off_by_default_and_described() -> None:
    configs = _configs()
    assert configs.effective("g", DLQ_TOPIC) == ""
    assert configs.effective("g", DLQ_COPY_RECORD) is False
    rows = {name: (value, own) for name, value, own in configs.describe("g")}
    assert rows[DLQ_TOPIC] == ("", False)
    assert rows[DLQ_COPY_RECORD] == ("false", False)


def test_a_name_with_the_prefix_is_stored_and_can_be_cleared() -> None:
    configs = _configs()
    configs.alter("g", {DLQ_TOPIC: "dlq.orders", DLQ_COPY_RECORD: "true"})
    assert configs.effective("g", DLQ_TOPIC) == "dlq.orders"
    assert configs.effective("g", DLQ_COPY_RECORD) is True
    configs.alter("g", {DLQ_TOPIC: ""})  # empty turns it off again
    assert configs.effective("g", DLQ_TOPIC) == ""
    configs.alter("g", {DLQ_TOPIC: None})
    assert configs.stored("g") == {DLQ_COPY_RECORD: "true"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("orders-dlq", "does not start with 'dlq.'"),
        ("__dlq.x", "cannot start with __"),
        ("dlq.a b", "not a legal topic name"),
        ("dlq." + "x" * 250, "not a legal topic name"),
    ],
)
def test_names_outside_the_rules_are_refused(value: str, message: str) -> None:
    configs = _configs()
    with pytest.raises(InvalidGroupConfig, match=message):
        configs.alter("g", {DLQ_TOPIC: value})
    assert configs.stored("g") == {}


def test_the_prefix_is_the_brokers_and_empty_allows_any_name() -> None:
    with pytest.raises(InvalidGroupConfig):
        _configs(errors_deadletterqueue_topic_name_prefix="dead.").alter("g", {DLQ_TOPIC: "dlq.x"})
    _configs(errors_deadletterqueue_topic_name_prefix="dead.").alter("g", {DLQ_TOPIC: "dead.x"})
    _configs(errors_deadletterqueue_topic_name_prefix="").alter("g", {DLQ_TOPIC: "anything"})


def test_copy_record_is_a_boolean() -> None:
    with pytest.raises(InvalidGroupConfig, match="true or false"):
        _configs().alter("g", {DLQ_COPY_RECORD: "yes"})


def test_the_topic_opt_in_is_a_known_boolean_topic_config() -> None:
    check_topic_config_names([DLQ_GROUP_ENABLE])
    check_topic_config_values({DLQ_GROUP_ENABLE: "TRUE"})
    with pytest.raises(InvalidConfig, match="either true or false"):
        check_topic_config_values({DLQ_GROUP_ENABLE: "1"})
    assert dlq_enabled({DLQ_GROUP_ENABLE: "true"})
    assert not dlq_enabled({}) and not dlq_enabled({DLQ_GROUP_ENABLE: "false"})
