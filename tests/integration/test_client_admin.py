"""The client's Admin against a real broker over a real socket."""

from __future__ import annotations

import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.server import Server
from client.admin import Admin
from client.admin import ConfigResourceType
from client.errors import KafkaError
from client.errors import TopicError
from client.producer import Producer
from client.records import Record

pytestmark = pytest.mark.integration


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


async def test_create_list_and_delete_topic(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        topic_id = await admin.create_topic("orders", 3)
        assert isinstance(topic_id, uuid.UUID) and topic_id.int != 0
        topics = await admin.list_topics()
        assert topics["orders"].partition_count == 3
        assert topics["orders"].topic_id == topic_id
        await admin.delete_topic("orders")
        assert "orders" not in await admin.list_topics()


async def test_create_existing_topic_is_refused(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        await admin.create_topic("dup", 1)
        with pytest.raises(TopicError) as info:
            await admin.create_topic("dup", 1)
    assert info.value.error_code == ErrorCode.topic_already_exists


async def test_delete_unknown_topic_is_refused(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        with pytest.raises(TopicError) as info:
            await admin.delete_topic("never-made")
    assert info.value.error_code == ErrorCode.unknown_topic_or_partition


async def test_group_configs_set_describe_and_delete(server: Server) -> None:
    group = int(ConfigResourceType.GROUP)
    async with Admin(_bootstrap(server)) as admin:
        await admin.incremental_alter_configs(
            group,
            "g1",
            {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1500"},
        )
        configs = await admin.describe_configs(group, "g1")
        assert configs["share.auto.offset.reset"] == "earliest"
        assert configs["share.record.lock.duration.ms"] == "1500"
        await admin.incremental_alter_configs(group, "g1", {"share.auto.offset.reset": None})
        configs = await admin.describe_configs(group, "g1")
        assert configs["share.auto.offset.reset"] == "latest"  # back to the broker default
        assert configs["share.record.lock.duration.ms"] == "1500"


async def test_group_config_below_broker_bound_is_refused(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        with pytest.raises(KafkaError) as info:
            await admin.incremental_alter_configs(
                ConfigResourceType.GROUP, "g2", {"share.record.lock.duration.ms": "10"}
            )
    assert info.value.error_code == ErrorCode.invalid_config


async def test_list_offsets_earliest_latest_and_by_timestamp(server: Server) -> None:
    base = int(time.time() * 1000) - 60_000
    async with Producer(_bootstrap(server)) as producer:
        for i in range(4):  # one batch per record
            await producer.send("offsets", b"%d" % i, partition=0, timestamp_ms=base + i * 1000)
    async with Admin(_bootstrap(server)) as admin:
        assert await admin.list_offsets("offsets", 0, "earliest") == 0
        assert await admin.list_offsets("offsets", 0, "latest") == 4
        assert await admin.list_offsets("offsets", 0, base + 1500) == 2
        assert await admin.list_offsets("offsets", 0, base + 10_000) == -1


async def test_list_offsets_by_timestamp_inside_one_batch(server: Server) -> None:
    base = int(time.time() * 1000) - 60_000
    async with Producer(_bootstrap(server)) as producer:
        await producer.send_batch(
            "offsets", 0, [Record(b"%d" % i, timestamp_ms=base + i * 1000) for i in range(4)]
        )
    async with Admin(_bootstrap(server)) as admin:
        assert await admin.list_offsets("offsets", 0, base + 1500) == 2


async def test_list_offsets_of_unknown_topic_is_a_typed_error(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        with pytest.raises(TopicError):
            await admin.list_offsets("nothing-here", 0, "latest")
