"""Per-node dynamic broker configs of `--processes N` (`broker.dynamic_config`): this node's
own layer (BROKER "<id>", in its node dir) over the cluster default ("", in the data dir),
as Kafka's DYNAMIC_BROKER_CONFIG wins over DYNAMIC_DEFAULT_BROKER_CONFIG."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.describe_configs.v4 import request as describe
from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from broker.dynamic_config import FILE_NAME
from broker.dynamic_config import DynamicBrokerConfigs
from broker.dynamic_config import InvalidBrokerConfig
from client.connection import Connection
from protocol.messages import build
from tests.brokers import free_ports
from tests.brokers import make_server

KEY = "log.retention.ms"
ATTR = "log_retention_ms"
TOPIC, BROKER = 2, 4  # DescribeConfigs resource types
# Kafka's DescribeConfigsResponse.ConfigSource
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 5


def _node(data: Path, node: int | None = 1) -> DynamicBrokerConfigs:
    config = BrokerConfig.load(environ={}, overrides={"log.dirs": str(data)})
    node_dir = None if node is None else data / "__nodes" / str(node)
    if node_dir is not None:
        node_dir.mkdir(parents=True, exist_ok=True)
    return DynamicBrokerConfigs(config, node_dir)


def test_a_nodes_own_value_wins_over_the_cluster_default_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    static = _node(tmp_path).current.by_name(KEY)
    node0, node1 = _node(tmp_path, 0), _node(tmp_path, 1)
    node1.alter({KEY: "1000"}, node=True)
    node0.alter({KEY: "2000"})  # the cluster default, node 0's file
    assert node1.reload()  # node 1 follows node 0's file, under its own value
    assert (node0.current.by_name(KEY), node1.current.by_name(KEY)) == (2000, 1000)
    assert node1.cluster.by_name(KEY) == 2000
    assert (node1.stored, node1.node_stored) == ({KEY: "2000"}, {KEY: "1000"})
    assert (tmp_path / "__nodes" / "1" / FILE_NAME).exists()
    assert not (tmp_path / "__nodes" / "0" / FILE_NAME).exists()

    again = _node(tmp_path, 1)
    assert again.current.by_name(KEY) == 1000
    again.alter({KEY: None}, node=True)  # back to the cluster default, not the static value
    assert again.current.by_name(KEY) == 2000 and again.node_stored == {}
    node0.alter({KEY: None})
    assert again.reload() and again.current.by_name(KEY) == static


def test_validate_only_and_a_bad_value_change_nothing(tmp_path: Path) -> None:
    node1 = _node(tmp_path)
    before = node1.current
    node1.alter({KEY: "1000"}, node=True, validate_only=True)
    with pytest.raises(InvalidBrokerConfig):
        node1.alter({KEY: "soon"}, node=True)
    assert node1.current is before and node1.node_stored == {}
    assert not (tmp_path / "__nodes" / "1" / FILE_NAME).exists()


def test_one_process_has_one_layer(tmp_path: Path) -> None:
    """N = 1: the node id and "" name the same settings, in the data dir's file."""
    single = _node(tmp_path, None)
    single.alter({KEY: "1000"}, node=True)
    assert single.stored == {KEY: "1000"} and single.node_stored == {}
    assert not single.per_node and single.cluster.by_name(KEY) == 1000


async def test_a_topic_config_whose_default_is_the_nodes_own_value_says_so(
    tmp_path: Path,
) -> None:
    """DescribeConfigs of a topic on node 0 of `--processes 2`: a config the topic does not
    set takes its default from the broker, and the node's own dynamic value is that default
    (it wins over the cluster default), so its source is DYNAMIC_BROKER_CONFIG, as Kafka
    names the first of the synonyms in order DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG, DEFAULT_CONFIG (core/src/main/scala/kafka/server/ConfigHelper.scala:
    `createTopicConfigEntry` takes the source of `configSynonyms`' first). Before, the topic
    named the layer under the node's value: DYNAMIC_DEFAULT_BROKER_CONFIG where the cluster
    default was set too, else DEFAULT_CONFIG or STATIC_BROKER_CONFIG. BROKER "" still shows
    the cluster default's own source, and BROKER "0" the node's."""
    port = free_ports(2)
    server = make_server(
        tmp_path, listeners=f"PLAINTEXT://127.0.0.1:{port}", processes=2, **{"node.id": 0}
    )
    await server.start()
    conn = await Connection.open("127.0.0.1", port)
    try:
        server.services.logs.create_topic("t", 1)
        dynamic = server.services.dynamic_configs
        # BROKER "0": node 0's own
        dynamic.alter({KEY: "1000", "log.cleaner.delete.retention.ms": "4000"}, node=True)
        dynamic.alter({KEY: "2000", "log.roll.ms": "3000"})  # BROKER "": the cluster's

        async def sources(kind: int, name: str) -> dict[str, tuple[str | None, int]]:
            resource = build(
                describe.DescribeConfigsResource, resource_type=kind, resource_name=name,
                configuration_keys=(KEY, "retention.ms", "segment.ms", "retention.bytes",
                                    "delete.retention.ms"),
            )  # fmt: skip
            answer = await conn.request(
                build(describe.DescribeConfigsRequest, resources=(resource,),
                      include_synonyms=False, include_documentation=False)
            )  # fmt: skip
            (result,) = answer.results
            assert result.error_code == ErrorCode.none, result.error_message
            return {c.name: (c.value, c.config_source) for c in result.configs}

        topic = await sources(TOPIC, "t")
        assert topic["retention.ms"] == ("1000", DYNAMIC_BROKER_CONFIG)  # the node's own
        assert topic["delete.retention.ms"] == ("4000", DYNAMIC_BROKER_CONFIG)  # its alone
        assert topic["segment.ms"] == ("3000", DYNAMIC_DEFAULT_BROKER_CONFIG)  # the cluster's
        assert topic["retention.bytes"][1] == DEFAULT_CONFIG
        assert (await sources(BROKER, ""))[KEY] == ("2000", DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert (await sources(BROKER, "0"))[KEY] == ("1000", DYNAMIC_BROKER_CONFIG)
    finally:
        await conn.close()
        await server.stop()
