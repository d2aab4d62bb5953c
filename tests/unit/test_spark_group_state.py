"""`spark.group_state.read_committed_group`: a read_committed stream's share group reads
committed records only once its group config `share.isolation.level` says so (KIP-932's group
config, Kafka's `GroupConfig.SHARE_ISOLATION_LEVEL_CONFIG`), so the source sets it when it is
not, and fails the query, naming the setting, when the broker refuses. The admin here is a fake
that records what it was asked (the Spark test drives a real broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from client.admin import ConfigResourceType
from client.errors import KafkaError
from spark.group_state import GroupLimits
from spark.group_state import read_committed_group
from spark.options import OptionError


class FakeAdmin:
    def __init__(self, refuse: ErrorCode | None = None) -> None:
        self.refuse = refuse
        self.altered: list[tuple[int, str, dict[str, str | None]]] = []

    async def incremental_alter_configs(
        self, resource_type: int, name: str, configs: Mapping[str, str | None]
    ) -> None:
        if self.refuse is not None:
            raise KafkaError(self.refuse)
        self.altered.append((resource_type, name, dict(configs)))


def run(admin: FakeAdmin, limits: GroupLimits) -> GroupLimits:
    fake: Any = admin
    return asyncio.run(read_committed_group(fake, "g", limits))


def test_a_read_uncommitted_group_is_set_to_read_committed() -> None:
    admin = FakeAdmin()
    assert run(admin, GroupLimits()).isolation_level == "read_committed"
    wanted = {"share.isolation.level": "read_committed"}
    assert admin.altered == [(ConfigResourceType.GROUP, "g", wanted)]


def test_a_read_committed_group_is_left_alone() -> None:
    admin = FakeAdmin(refuse=ErrorCode.group_authorization_failed)  # no alter right needed
    limits = GroupLimits(isolation_level="read_committed")
    assert run(admin, limits) is limits


def test_a_refused_change_fails_naming_the_setting() -> None:
    admin = FakeAdmin(refuse=ErrorCode.group_authorization_failed)
    with pytest.raises(OptionError, match=r"share\.isolation\.level=read_committed\), or drop"):
        run(admin, GroupLimits())
