"""Per-node dynamic broker configs across `shoal serve --processes 2` (issue 33,
docs/multicore.md).

`kafka-configs --entity-type brokers --entity-name 1 --alter` and confluent-kafka's
`incremental_alter_configs` on ConfigResource(BROKER, "1") set a dynamic config of broker 1:
librdkafka sends it to broker 1, which answers for itself, as a Kafka broker validates a change
of its own configs (`ConfigAdminManager.preprocess`: the name must be "" or this broker's id).
Node 1 writes them to its own `__nodes/1/` (one writer per file) and they win over the cluster
default ("", written by node 0), as Kafka's DYNAMIC_BROKER_CONFIG wins over
DYNAMIC_DEFAULT_BROKER_CONFIG. A name that is not this broker's id is INVALID_REQUEST with
Kafka's messages (`validateResourceNameIsCurrentNodeId`; DescribeConfigs:
`ConfigHelper.describeConfigs`). librdkafka refuses an empty broker name before sending, so the
cluster default and the refusals go through our own client's raw requests.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import ConfigSource
from confluent_kafka.admin import ResourceType
from kio.schema.describe_configs import v4 as describe_v4
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs import v1 as alter_v1
from kio.static.primitive import i8

from client.connection import Connection
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import admin
from tests.compat.support import error_code

pytestmark = [pytest.mark.compat, pytest.mark.slow]

KEY = "log.retention.ms"
# Node 1's own value, the cluster default, the legacy AlterConfigs' value: none is the default
# (Kafka's 168 hours), so each assertion can fail.
OWN, DAY, HOUR = str(2 * 24 * 3_600_000), str(24 * 3_600_000), str(3_600_000)
BROKER, SET, DELETE = 4, 0, 1


def _set(client: AdminClient, node: str, value: str | None, dry: bool = False) -> int:
    """IncrementalAlterConfigs SET (None: DELETE) of KEY on broker `node`; the error code."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry(KEY, value or "", incremental_operation=op)
    resource = ConfigResource(ResourceType.BROKER, node, incremental_configs=[entry])
    try:
        client.incremental_alter_configs([resource], validate_only=dry)[resource].result(20)
    except KafkaException as e:
        return error_code(e)
    return 0


def _described(client: AdminClient, node: str) -> tuple[str, ConfigSource]:
    resource = ConfigResource(ResourceType.BROKER, node)
    entry = client.describe_configs([resource], request_timeout=20)[resource].result(30)[KEY]
    return entry.value, ConfigSource(entry.source)


def _raw(port: int, request: Any) -> Any:
    async def send() -> Any:
        conn = await Connection.open("127.0.0.1", port, client_id="configs")
        try:
            return await conn.request(request)
        finally:
            await conn.close()

    return asyncio.run(send())


def _raw_set(port: int, name: str, value: str) -> tuple[int, str | None]:
    m = alter_v1.request
    answer = _raw(port, alter_v1.IncrementalAlterConfigsRequest(
        resources=(m.AlterConfigsResource(
            resource_type=i8(BROKER), resource_name=name,
            configs=(m.AlterableConfig(name=KEY, config_operation=i8(SET), value=value),),
        ),),
        validate_only=False,
    ))  # fmt: skip
    (r,) = answer.responses
    return r.error_code, r.error_message


def _raw_describe(port: int, name: str) -> tuple[int, str | None, str | None, int]:
    m = describe_v4.request
    answer = _raw(port, describe_v4.DescribeConfigsRequest(
        resources=(m.DescribeConfigsResource(resource_type=i8(BROKER), resource_name=name,
                                             configuration_keys=(KEY,)),),
        include_synonyms=False, include_documentation=False,
    ))  # fmt: skip
    (r,) = answer.results
    if r.error_code != ErrorCode.none:
        return r.error_code, r.error_message, None, -1
    (c,) = r.configs
    return r.error_code, None, c.value, int(c.config_source)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("broker-configs") / "data"
    b = configured_broker(data)
    b.port = free_ports(2)
    b.extra += ["--processes", "2"]
    b.start(timeout=90)
    nodes = wait_for_nodes(b, 2, timeout=90)
    try:
        yield b, nodes, data
    finally:
        b.stop(60)


def _until(check: Any, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.1)


def test_each_node_keeps_its_own_broker_configs_over_the_cluster_default(
    broker: tuple[BrokerProcess, dict[int, int], Path],
) -> None:
    """Broker "1" set through confluent-kafka's AdminClient: validate_only changes nothing;
    then node 1 describes it as DYNAMIC_BROKER_CONFIG and node 0 keeps its value; the cluster
    default set on node 0 reaches node 0 and not node 1's own value; node 1 keeps its value
    after a kill -9; a DELETE on "1" goes back to the cluster default; the legacy AlterConfigs
    of "1" replaces node 1's own configs. Each node's own file is in its node dir."""
    b, nodes, data = broker
    client = admin(b.bootstrap)
    static = _described(client, "1")[0]
    assert _set(client, "1", OWN, dry=True) == 0
    assert _described(client, "1")[0] == static
    assert _set(client, "1", OWN) == 0
    assert _described(client, "1") == (OWN, ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert _described(client, "0")[0] == static
    assert json.loads((data / "__nodes" / "1" / "dynamic-broker-configs.json").read_text()) == {
        KEY: OWN
    }
    assert not (data / "__nodes" / "0" / "dynamic-broker-configs.json").exists()

    # The cluster default: node 0 writes it; node 1 reads it, under its own value.
    assert _raw_set(b.port, "", DAY) == (ErrorCode.none, None)
    assert _raw_set(b.port + 1, "", DAY)[0] == ErrorCode.not_controller  # node 0 writes it
    assert _described(client, "0") == (DAY, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    _until(lambda: _raw_describe(b.port + 1, "")[2] == DAY)
    assert _raw_describe(b.port + 1, "")[3] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert _described(client, "1") == (OWN, ConfigSource.DYNAMIC_BROKER_CONFIG)

    os.kill(nodes[1], 9)
    nodes.update(wait_for_nodes(b, 2, timeout=90, not_pids={nodes[1]}))
    client = admin(b.bootstrap)
    _until(lambda: _raw_describe(b.port + 1, "1")[0] == ErrorCode.none, 30)
    assert _described(client, "1") == (OWN, ConfigSource.DYNAMIC_BROKER_CONFIG)

    assert _set(client, "1", None) == 0
    assert _described(client, "1") == (DAY, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)

    resource = ConfigResource(ResourceType.BROKER, "1", set_config={KEY: HOUR})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy API, still sent
        client.alter_configs([resource])[resource].result(20)
    assert _described(client, "1") == (HOUR, ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert _described(client, "0") == (DAY, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_a_broker_name_that_is_not_the_receivers_id_is_invalid_request(
    broker: tuple[BrokerProcess, dict[int, int], Path],
) -> None:
    """Kafka's `ConfigAdminManager.validateResourceNameIsCurrentNodeId` and
    `ConfigHelper.describeConfigs`: another broker's id, an unknown one or a name that is no
    integer is INVALID_REQUEST, and nothing changes."""
    b, _, _ = broker
    assert _raw_set(b.port, "1", OWN) == (
        ErrorCode.invalid_request,
        "Unexpected broker id, expected 0, but received 1",
    )
    assert _raw_set(b.port + 1, "7", OWN) == (
        ErrorCode.invalid_request,
        "Unexpected broker id, expected 1, but received 7",
    )
    assert _raw_set(b.port, "x", OWN) == (
        ErrorCode.invalid_request,
        "Node id must be an integer, but it is: x",
    )
    assert _raw_describe(b.port, "7")[:2] == (
        ErrorCode.invalid_request,
        "Unexpected broker id, expected 0 or empty string, but received 7",
    )
    client = admin(b.bootstrap)
    assert _described(client, "0")[0] != OWN
