"""The typed views of a group's configs in force (`GroupConfigs.share`, `.consumer`): every
group config has exactly one typed field, and each field reads what `effective` reads, capped
by the broker's bounds in force (seed 002)."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator.group_configs import BROKER_DEFAULTS
from coordinator.group_configs import CONSUMER_FIELDS
from coordinator.group_configs import DEFS
from coordinator.group_configs import SHARE_FIELDS
from coordinator.group_configs import ConsumerGroupConfig
from coordinator.group_configs import GroupConfigs
from coordinator.group_configs import ShareGroupConfig

_PY_TYPES = {"int": int, "str": str, "bool": bool, "float": float}


def _configs(values: dict[str, Any]) -> GroupConfigs:
    return GroupConfigs(None, values.__getitem__)


def _defaults() -> dict[str, Any]:
    return {name: default for name, (default, _) in BROKER_DEFAULTS.items()}


def test_every_group_config_has_one_typed_field_of_its_type() -> None:
    named = list(SHARE_FIELDS.values()) + list(CONSUMER_FIELDS.values())
    assert sorted(named) == sorted(DEFS)  # none missing, none twice
    for view, fields in ((ShareGroupConfig, SHARE_FIELDS), (ConsumerGroupConfig, CONSUMER_FIELDS)):
        declared = {f.name: f.type for f in dataclasses.fields(view)}
        assert set(declared) == set(fields)
        for field, name in fields.items():
            assert _PY_TYPES[str(declared[field])] is DEFS[name].kind, field


def test_the_views_read_what_effective_reads_capped_by_the_bounds() -> None:
    values = _defaults()
    configs = _configs(values)
    configs.alter("g", {
        "share.record.lock.duration.ms": "50000", "share.acquire.mode": "record_limit",
        "share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": "dlq.g",
        "consumer.session.timeout.ms": "50000",
    })  # fmt: skip
    values["group.share.max.record.lock.duration.ms"] = 40_000  # bounds moved since (dynamic)
    share, consumer = configs.share("g"), configs.consumer("g")
    for field, name in SHARE_FIELDS.items():
        assert getattr(share, field) == configs.effective("g", name), field
    for field, name in CONSUMER_FIELDS.items():
        assert getattr(consumer, field) == configs.effective("g", name), field
    assert share.record_lock_duration_ms == 40_000
    assert share.record_limit and share.starts_at_earliest and share.dead_letter_topic == "dlq.g"
    assert consumer.session_timeout_ms == 50_000
    other = configs.share("h")  # the broker's defaults
    assert not other.record_limit and not other.starts_at_earliest
    assert other.delivery_count_limit == values["group.share.delivery.count.limit"]
