"""Topic and broker configs through our client: DescribeConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs import v1 as incremental_v1
from kio.static.primitive import i8

from broker.server import Server
from client.admin import Admin
from client.admin import ConfigResourceType
from client.admin import ConfigSource
from client.connection import Connection
from client.errors import KafkaError
from protocol.framing import frame
from protocol.messages import encode_request
from tests.brokers import make_server

pytestmark = pytest.mark.integration

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER
GROUP = ConfigResourceType.GROUP


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


async def _error(call: object) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        await call  # type: ignore[misc]
    return info.value.error_code


async def test_alter_topic_configs_applies_persists_and_reverts(tmp_path: Path) -> None:
    srv = make_server(tmp_path / "data")
    await srv.start()
    async with Admin(_bootstrap(srv)) as admin:
        await admin.create_topic("t", 2)
        before = {e.name: e for e in await admin.describe_config_entries(TOPIC, "t")}
        assert before["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
        await admin.incremental_alter_configs(
            TOPIC, "t", {"retention.ms": "60000", "cleanup.policy": "delete"}
        )
        after = {e.name: e for e in await admin.describe_config_entries(TOPIC, "t")}
        assert after["retention.ms"].value == "60000"
        assert after["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert after["cleanup.policy"].value == "delete"
    log = srv.services.logs.log("t", 1)
    assert log is not None and log.config.retention_ms == 60000  # type: ignore[attr-defined]
    await srv.stop()
    srv = make_server(tmp_path / "data")
    await srv.start()
    try:
        async with Admin(_bootstrap(srv)) as admin:
            assert (await admin.describe_configs(TOPIC, "t"))["retention.ms"] == "60000"
            await admin.incremental_alter_configs(TOPIC, "t", {"retention.ms": None})
            entries = {e.name: e for e in await admin.describe_config_entries(TOPIC, "t")}
            assert entries["retention.ms"].value == str(7 * 24 * 3600 * 1000)
            assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    finally:
        await srv.stop()


async def test_topic_config_errors(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        await admin.create_topic("t", 1)
        alter = admin.incremental_alter_configs
        assert await _error(alter(TOPIC, "t", {"no.such.config": "1"})) == ErrorCode.invalid_config
        assert await _error(alter(TOPIC, "t", {"retention.ms": "soon"})) == ErrorCode.invalid_config
        assert await _error(alter(TOPIC, "t", {"segment.bytes": "1"})) == ErrorCode.invalid_config
        assert (
            await _error(alter(TOPIC, "missing", {"retention.ms": "1"}))
            == ErrorCode.unknown_topic_or_partition
        )
        assert (
            await _error(admin.describe_configs(TOPIC, "missing"))
            == ErrorCode.unknown_topic_or_partition
        )
        assert (await admin.describe_configs(TOPIC, "t"))["segment.bytes"] == str(1024**3)


async def test_dynamic_broker_bounds_persist_and_do_not_revalidate_groups(
    tmp_path: Path,
) -> None:
    srv = make_server(tmp_path / "data")
    await srv.start()
    lock_max = "group.share.max.record.lock.duration.ms"
    async with Admin(_bootstrap(srv)) as admin:
        await admin.incremental_alter_configs(
            GROUP, "g", {"share.record.lock.duration.ms": "55000"}
        )
        await admin.incremental_alter_configs(BROKER, "1", {lock_max: "40000"})
        entries = {e.name: e for e in await admin.describe_config_entries(BROKER, "1")}
        assert entries[lock_max].value == "40000"
        assert entries[lock_max].source == ConfigSource.DYNAMIC_BROKER_CONFIG
        assert not entries[lock_max].read_only and entries["log.dirs"].read_only
        # Seed 002: the stored group value stays, capped by the new bound when read...
        group = await admin.describe_configs(GROUP, "g")
        assert group["share.record.lock.duration.ms"] == "40000"
        # ...while new group values are validated against it.
        assert (
            await _error(
                admin.incremental_alter_configs(
                    GROUP, "g", {"share.record.lock.duration.ms": "45000"}
                )
            )
            == ErrorCode.invalid_config
        )
    await srv.stop()
    srv = make_server(tmp_path / "data")
    await srv.start()
    try:
        async with Admin(_bootstrap(srv)) as admin:
            assert (await admin.describe_configs(BROKER, "1"))[lock_max] == "40000"
            await admin.incremental_alter_configs(BROKER, "", {lock_max: None})
            assert (await admin.describe_configs(BROKER, "1"))[lock_max] == "60000"
            group = await admin.describe_configs(GROUP, "g")
            assert group["share.record.lock.duration.ms"] == "55000"
    finally:
        await srv.stop()


async def test_a_group_config_not_set_shows_its_broker_setting_and_source(
    tmp_path: Path,
) -> None:
    """Kafka's `ConfigHelper.createGroupConfigEntry`: a group config the group has not set is
    described with its broker default (`group.` + its name) and that setting's source."""
    srv = make_server(tmp_path / "data", **{"group.consumer.session.timeout.ms": 50_000})
    await srv.start()
    try:
        async with Admin(_bootstrap(srv)) as admin:

            async def described(name: str) -> tuple[str | None, ConfigSource]:
                entries = await admin.describe_config_entries(GROUP, "g", (name,))
                return entries[0].value, entries[0].source

            session = "share.session.timeout.ms"
            assert await described(session) == ("45000", ConfigSource.DEFAULT_CONFIG)
            assert await described("consumer.session.timeout.ms") == (
                "50000",
                ConfigSource.STATIC_BROKER_CONFIG,
            )
            await admin.incremental_alter_configs(BROKER, "", {f"group.{session}": "50000"})
            expected = ("50000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            assert await described(session) == expected
            await admin.incremental_alter_configs(GROUP, "g", {session: "55000"})
            assert await described(session) == ("55000", ConfigSource.GROUP_CONFIG)
            # Kafka's GroupCoordinatorConfig settings are static: not altered at runtime.
            refused = admin.incremental_alter_configs(
                BROKER, "", {"group.consumer.session.timeout.ms": "55000"}
            )
            assert await _error(refused) == ErrorCode.invalid_request
    finally:
        await srv.stop()


async def test_broker_config_errors(server: Server) -> None:
    async with Admin(_bootstrap(server)) as admin:
        alter = admin.incremental_alter_configs
        # Not dynamic: Kafka's INVALID_REQUEST ("Cannot update these configs dynamically").
        assert await _error(alter(BROKER, "1", {"listeners": "x"})) == ErrorCode.invalid_request
        assert await _error(alter(BROKER, "", {"log.dirs": "/x"})) == ErrorCode.invalid_request
        codes = [
            await _error(alter(BROKER, "1", {"log.retention.ms": "-2"})),  # below -1
            await _error(alter(BROKER, "1", {"no.such.config": "1"})),
            await _error(alter(BROKER, "1", {"group.share.max.delivery.count.limit": "x"})),
            # The default (5) would lie outside the new bounds.
            await _error(alter(BROKER, "1", {"group.share.max.delivery.count.limit": "3"})),
            await _error(alter(BROKER, "1", {"group.share.auto.offset.reset": "middle"})),
        ]
        assert codes == [ErrorCode.invalid_config] * 5
        assert await _error(alter(BROKER, "7", {})) == ErrorCode.invalid_request
        assert await _error(admin.describe_configs(BROKER, "7")) == ErrorCode.invalid_request
        assert (await admin.describe_configs(BROKER, "1"))[
            "group.share.max.delivery.count.limit"
        ] == "10"


async def test_log_configs_set_on_the_cluster_default_reach_every_log(tmp_path: Path) -> None:
    """The cluster default "" (which librdkafka cannot name): described back as
    DYNAMIC_DEFAULT_BROKER_CONFIG, followed at once by a topic without its own value, and still
    in force after a restart; a topic with its own value keeps it."""
    srv = make_server(tmp_path / "data")
    await srv.start()
    try:
        async with Admin(_bootstrap(srv)) as admin:
            await admin.create_topic("plain", 1)
            await admin.create_topic("own", 1)
            await admin.incremental_alter_configs(TOPIC, "own", {"segment.bytes": "4096"})
            await admin.incremental_alter_configs(
                BROKER, "", {"log.segment.bytes": "2048", "log.flush.interval.messages": "1"}
            )
            broker = {e.name: e for e in await admin.describe_config_entries(BROKER, "")}
            plain = {e.name: e for e in await admin.describe_config_entries(TOPIC, "plain")}
            own = {e.name: e for e in await admin.describe_config_entries(TOPIC, "own")}
        logs = srv.services.logs
        live = [logs.log(t, 0).config for t in ("plain", "own")]  # type: ignore[union-attr]
    finally:
        await srv.stop()
    srv = make_server(tmp_path / "data")
    await srv.start()
    restarted = [srv.services.logs.log(t, 0).config for t in ("plain", "own")]  # type: ignore[union-attr]
    await srv.stop()
    assert (broker["log.segment.bytes"].value, broker["log.segment.bytes"].source) == (
        "2048",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert not broker["log.segment.bytes"].read_only
    assert (plain["segment.bytes"].value, plain["segment.bytes"].source) == (
        "2048",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert (own["segment.bytes"].value, own["segment.bytes"].source) == (
        "4096",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert plain["flush.messages"].value == own["flush.messages"].value == "1"
    for configs in (live, restarted):
        assert [c.segment_bytes for c in configs] == [2048, 4096]
        assert [c.flush_messages for c in configs] == [1, 1]


async def test_configs_altered_for_a_client_gone_at_once_are_altered_whole(
    broker: Server,
) -> None:
    """An IncrementalAlterConfigs of many groups (changed a slice at a time), whose client
    closes its connection right after sending it: every group's config is changed and written,
    as Kafka's controller commits a request's config records whatever became of the request
    (`ControllerApis.handleIncrementalAlterConfigs` -> `ConfigurationControlManager`). Before,
    the request's task, cancelled when its connection was lost, stopped between slices: some
    groups changed, in memory only, and the rest not."""
    groups = 4_000  # decoded on the loop (below 256 KiB): handled at once, cancelled after
    m = incremental_v1.request
    resources = tuple(
        m.AlterConfigsResource(
            resource_type=i8(32), resource_name=f"g{i}",
            configs=(m.AlterableConfig(name="share.auto.offset.reset", config_operation=i8(0),
                                       value="earliest"),),
        )
        for i in range(groups)
    )  # fmt: skip
    request = incremental_v1.IncrementalAlterConfigsRequest(
        resources=resources, validate_only=False
    )
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(frame(encode_request(request, 1, "gone-at-once")))
    configs = broker.services.group_configs
    deadline = asyncio.get_running_loop().time() + 30
    while not configs.stored(f"g{groups - 1}") or configs.unsaved() is not None:
        assert asyncio.get_running_loop().time() < deadline, "the last groups never changed"
        await asyncio.sleep(0.05)
    stored = json.loads((broker.config.data_dir / "share-group-configs.json").read_text())
    assert len(stored) == groups


async def _loop_gaps_while(change: Awaitable[object], monkeypatch: pytest.MonkeyPatch) -> float:
    """The loop's longest wait, in seconds, while `change` runs on a disk whose fsyncs take
    250 ms each (a ticker on the loop counts its wakes)."""
    real = os.fsync

    def slow(fd: int) -> None:
        time.sleep(0.25)
        real(fd)

    gaps: list[float] = []

    async def ticking() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(ticking())
    while not gaps:  # ticking before the request is sent
        await asyncio.sleep(0.005)
    monkeypatch.setattr(os, "fsync", slow)
    try:
        await change
    finally:
        monkeypatch.undo()
    await asyncio.sleep(0.05)  # the ticker's wake after a held loop is counted
    ticker.cancel()
    return max(gaps)


@pytest.mark.latency
async def test_a_topic_config_write_leaves_the_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The topic's file (tmp, fsync, rename, fsync of the directory) is written in a thread
    (`TopicAdmin.alter_configs`): a disk that takes its time holds no other client. On the
    loop, each of a write's two fsyncs held it whole (the shared development disk: 8.5 ms a
    write at the median, 158 ms at p99, 190 ms at worst, load 9-11; 250 ms each here)."""
    server = make_server(tmp_path / "data")
    await server.start()
    try:
        async with Admin(_bootstrap(server)) as admin:
            await admin.create_topic("slow-disk", 1)
            change = admin.incremental_alter_configs(TOPIC, "slow-disk", {"retention.ms": "1000"})
            held = await _loop_gaps_while(change, monkeypatch)
            assert held < 0.2, f"the loop waited {held * 1e3:.0f} ms"
            configs = await admin.describe_configs(TOPIC, "slow-disk", ("retention.ms",))
            assert configs == {"retention.ms": "1000"}
    finally:
        await server.stop()


@pytest.mark.latency
async def test_a_broker_config_write_leaves_the_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dynamic broker configs' file is written in a thread too
    (`DynamicBrokerConfigs.alter_durably`), one change at a time: on the loop its two fsyncs
    held every client (509 ms here without it)."""
    server = make_server(tmp_path / "data")
    await server.start()
    try:
        async with Admin(_bootstrap(server)) as admin:
            name = "group.share.delivery.count.limit"
            change = admin.incremental_alter_configs(BROKER, "", {name: "3"})
            held = await _loop_gaps_while(change, monkeypatch)
            assert held < 0.2, f"the loop waited {held * 1e3:.0f} ms"
            assert (await admin.describe_configs(BROKER, "", (name,))) == {name: "3"}
        stored = json.loads((server.config.data_dir / "dynamic-broker-configs.json").read_text())
        assert stored == {name: "3"}
    finally:
        await server.stop()


async def test_stored_topic_configs_take_only_the_values_kafka_takes(tmp_path: Path) -> None:
    """The configs Shoal keeps without acting on them are checked as Kafka's LogConfig defines
    them (storage/.../log/LogConfig.java): compression.type among BrokerCompressionType's names,
    message.timestamp.type CreateTime or LogAppendTime, max.message.bytes INT at least 0,
    min.insync.replicas INT at least 1, retention.local.* LONG at least -2; INVALID_CONFIG with
    ConfigDef's message otherwise, at CreateTopics and at IncrementalAlterConfigs alike."""
    server = make_server(tmp_path / "data")
    await server.start()
    try:
        async with Admin(_bootstrap(server)) as admin:
            with pytest.raises(KafkaError) as made:
                await admin.create_topic("codec", 1, {"compression.type": "brotli"})
            assert made.value.error_code == ErrorCode.invalid_config
            assert "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer" in str(
                made.value
            )
            assert server.services.logs.topic("codec") is None
            await admin.create_topic("checked", 1, {"compression.type": "zstd"})
            refused = {
                "message.timestamp.type": "createtime",
                "max.message.bytes": "1e6",
                "min.insync.replicas": "0",
                "retention.local.ms": "-3",
                "retention.local.bytes": str(2**63),
            }
            for name, value in refused.items():
                code = await _error(
                    admin.incremental_alter_configs(TOPIC, "checked", {name: value})
                )
                assert code == ErrorCode.invalid_config, (name, value)
            taken = {
                "message.timestamp.type": "LogAppendTime",
                "max.message.bytes": " 2000000 ",
                "min.insync.replicas": "1",
                "retention.local.ms": "-2",
                "retention.local.bytes": "-2",
            }
            await admin.incremental_alter_configs(TOPIC, "checked", taken)
            stored = await admin.describe_configs(TOPIC, "checked", tuple(taken))
            assert stored == taken
    finally:
        await server.stop()


async def test_described_with_synonyms_each_layer_in_kafkas_order(tmp_path: Path) -> None:
    """DescribeConfigs v1+ with IncludeSynonyms: each entry lists the value at every layer
    that has one, in the order the first wins (Kafka's ConfigHelper.configSynonyms: the
    topic's own, this broker's dynamic value, the cluster default, the properties file, the
    default), and the entry's source is the first one's; without it, none."""
    from kio.schema.describe_configs import v4 as describe_v4

    server = make_server(tmp_path / "data", **{"log.segment.bytes": "2097152"})
    await server.start()
    try:
        async with Admin(_bootstrap(server)) as admin:
            await admin.create_topic("layered", 1)
            await admin.incremental_alter_configs(TOPIC, "layered", {"retention.ms": "60000"})
            await admin.incremental_alter_configs(BROKER, "", {"log.retention.ms": "7200000"})
        conn = await Connection.open("127.0.0.1", server.port)
        try:

            async def described(kind: int, name: str, key: str, synonyms: bool) -> Any:
                resource = describe_v4.request.DescribeConfigsResource(
                    resource_type=i8(kind), resource_name=name, configuration_keys=(key,)
                )
                request = describe_v4.DescribeConfigsRequest(
                    resources=(resource,), include_synonyms=synonyms, include_documentation=False
                )
                answer = await conn.request(request)
                (entry,) = answer.results[0].configs
                return entry

            def layers(entry: Any) -> list[tuple[str, str | None, int]]:
                return [(s.name, s.value, int(s.source)) for s in entry.synonyms]

            retention = await described(TOPIC, "layered", "retention.ms", True)
            assert (retention.value, int(retention.config_source)) == ("60000", 1)
            assert layers(retention) == [
                ("retention.ms", "60000", 1),  # DYNAMIC_TOPIC_CONFIG
                ("log.retention.ms", "7200000", 3),  # DYNAMIC_DEFAULT_BROKER_CONFIG
                ("log.retention.ms", str(7 * 24 * 3600 * 1000), 5),  # DEFAULT_CONFIG
            ]
            segment = await described(TOPIC, "layered", "segment.bytes", True)
            assert (segment.value, int(segment.config_source)) == ("2097152", 4)
            assert layers(segment) == [
                ("log.segment.bytes", "2097152", 4),  # STATIC_BROKER_CONFIG
                ("log.segment.bytes", str(1024**3), 5),
            ]
            broker = await described(BROKER, "", "log.retention.ms", True)
            assert int(broker.config_source) == 3 and layers(broker)[0][2] == 3
            assert layers(await described(TOPIC, "layered", "retention.ms", False)) == []
        finally:
            await conn.close()
    finally:
        await server.stop()
