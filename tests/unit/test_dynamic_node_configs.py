"""Per-node dynamic broker configs of `--processes N` (`broker.dynamic_config`): this node's
own layer (BROKER "<id>", in its node dir) over the cluster default ("", in the data dir),
as Kafka's DYNAMIC_BROKER_CONFIG wins over DYNAMIC_DEFAULT_BROKER_CONFIG."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.dynamic_config import FILE_NAME
from broker.dynamic_config import DynamicBrokerConfigs
from broker.dynamic_config import InvalidBrokerConfig

KEY = "log.retention.ms"
ATTR = "log_retention_ms"


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
