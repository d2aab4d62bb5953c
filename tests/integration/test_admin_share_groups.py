"""Share-group admin through our client: ListGroups, ShareGroupDescribe, DeleteGroups."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
from kio.schema.delete_groups import v2 as delete_v2
from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId

from broker.server import Server
from broker.share.share_group_offsets import ShareGroupOffsets
from client.admin import Admin
from client.admin import ConfigResourceType
from client.errors import KafkaError
from client.share_consumer import ShareConsumer
from protocol.framing import frame
from protocol.messages import encode_request
from tests.brokers import make_server
from tests.integration.admin_support import FAST_GROUPS
from tests.integration.admin_support import consume_all
from tests.integration.admin_support import poll_until
from tests.integration.admin_support import prepare
from tests.integration.admin_support import produce

pytestmark = pytest.mark.integration

GROUP, TOPIC = "workers", "jobs"


def _bootstrap(server: Server) -> str:
    return f"127.0.0.1:{server.port}"


async def test_list_and_describe_a_running_then_empty_group(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    await prepare(bootstrap, TOPIC, GROUP, partitions=2)
    await produce(bootstrap, TOPIC, 2)
    async with Admin(bootstrap) as admin:
        async with ShareConsumer(bootstrap, GROUP, client_id="cli-1") as consumer:
            consumer.subscribe([TOPIC])
            assert len(await poll_until(consumer, 2)) == 2
            (listed,) = await admin.list_groups(types=["share"])
            assert (listed.group_id, listed.group_type, listed.state) == (GROUP, "share", "Stable")
            assert listed.protocol_type == "share"
            desc = (await admin.describe_share_groups([GROUP]))[GROUP]
            assert desc.state == "Stable" and desc.assignor == "simple"
            (member,) = desc.members
            assert member.member_id == consumer.member_id
            assert member.client_id == "cli-1" and member.client_host.startswith("127.0.0.1")
            assert member.subscribed == (TOPIC,)
            assert member.assignment == {TOPIC: (0, 1)}
            assert member.member_epoch == desc.assignment_epoch >= 1
        desc = (await admin.describe_share_groups([GROUP]))[GROUP]
        assert (desc.state, desc.members) == ("Empty", [])
        assert [g.group_id for g in await admin.list_groups(states=["empty"])] == [GROUP]
        assert await admin.list_groups(states=["Stable"]) == []
        assert await admin.list_groups(types=["consumer"]) == []
        assert [g.group_id for g in await admin.list_groups()] == [GROUP]


async def test_describe_unknown_group_is_group_id_not_found(broker: Server) -> None:
    async with Admin(_bootstrap(broker)) as admin:
        with pytest.raises(KafkaError) as info:
            await admin.describe_share_groups(["nobody"])
    assert info.value.error_code == ErrorCode.group_id_not_found


async def test_delete_groups_only_deletes_empty_known_groups(broker: Server) -> None:
    bootstrap = _bootstrap(broker)
    await prepare(bootstrap, TOPIC, GROUP)
    await produce(bootstrap, TOPIC, 3)
    async with Admin(bootstrap) as admin:
        async with ShareConsumer(bootstrap, GROUP) as consumer:
            consumer.subscribe([TOPIC])
            assert len(await poll_until(consumer, 3)) == 3
            results = await admin.delete_groups([GROUP, "nobody"])
            busy, unknown = results[GROUP], results["nobody"]
            assert busy is not None and busy.error_code == ErrorCode.non_empty_group
            assert unknown is not None and unknown.error_code == ErrorCode.group_id_not_found
        state_dir = Path(broker.config.data_dir) / "__share_state"
        for _ in range(40):  # snapshot files are written by a duty, about once a second
            if list(state_dir.glob("*/*.snapshot")):
                break
            await asyncio.sleep(0.1)
        assert list(state_dir.glob("*/*.snapshot"))
        assert await admin.delete_groups([GROUP]) == {GROUP: None}
        assert await admin.list_groups() == []
        assert not list(state_dir.glob("*/*.snapshot"))
        configs = await admin.describe_configs(ConfigResourceType.GROUP, GROUP)
        assert configs["share.auto.offset.reset"] == "latest"  # its own config went too
        with pytest.raises(KafkaError) as info:
            await admin.describe_share_group_offsets(GROUP)
        assert info.value.error_code == ErrorCode.group_id_not_found
    # A group of the same name starts afresh (latest): the old records are not delivered.
    async with ShareConsumer(bootstrap, GROUP) as consumer:
        consumer.subscribe([TOPIC])
        assert await poll_until(consumer, 1, timeout_s=1.0) == []
        await produce(bootstrap, TOPIC, 1, start=3)
        assert [r.value for r in await poll_until(consumer, 1)] == [b"value-3"]


async def test_empty_group_is_listed_after_a_restart(tmp_path: Path) -> None:
    srv = make_server(tmp_path / "data", **FAST_GROUPS)
    await srv.start()
    await prepare(_bootstrap(srv), TOPIC, GROUP)
    await produce(_bootstrap(srv), TOPIC, 2)
    assert len(await consume_all(_bootstrap(srv), TOPIC, GROUP, 2)) == 2
    await srv.stop()
    srv = make_server(tmp_path / "data", **FAST_GROUPS)
    await srv.start()
    try:
        async with Admin(_bootstrap(srv)) as admin:
            (listed,) = await admin.list_groups()
            assert (listed.group_id, listed.state) == (GROUP, "Empty")
            desc = (await admin.describe_share_groups([GROUP]))[GROUP]
            assert desc.members == []
            assert await admin.delete_groups([GROUP]) == {GROUP: None}
            assert await admin.list_groups() == []
    finally:
        await srv.stop()


async def test_a_share_group_deleted_for_a_client_gone_at_once_is_deleted_whole(
    broker: Server,
) -> None:
    """A DeleteGroups of an empty share group with state on many share-partitions (dropped a
    slice at a time), whose client closes its connection right after sending it. The group
    goes whole, its config with it, as Kafka's coordinator writes a DeleteGroups' records
    whatever became of the request (`GroupMetadataManager.deleteGroups` appends the tombstones
    and the share state is deleted through the persister, `GroupCoordinatorService.deleteGroups`).
    Before, the request's task, cancelled when its connection was lost, stopped after the
    coordinator forgot the group: the share-partitions not yet dropped stayed (a group made
    again under the name started there), and the forgotten config was not written."""
    partitions = 1000
    await asyncio.to_thread(broker.services.logs.create_topic, TOPIC, partitions)
    async with Admin(_bootstrap(broker)) as admin:
        await admin.alter_share_group_offsets(GROUP, {(TOPIC, p): 0 for p in range(partitions)})
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    offsets = ShareGroupOffsets(broker.services.share_partitions, broker.services.logs,
                                broker.services.now_ms)  # fmt: skip
    assert len(offsets.partitions(GROUP)) == partitions
    # The snapshot files caught up first: a snapshot write under way while the group is
    # deleted brings its share-partitions back (a race of its own, reported; not this test's).
    await broker._snapshots()
    request = delete_v2.DeleteGroupsRequest(groups_names=(GroupId(GROUP),))
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        sock.sendall(frame(encode_request(request, 1, "gone-at-once")))
    async with Admin(_bootstrap(broker)) as admin:
        deadline = asyncio.get_running_loop().time() + 30
        while await admin.list_groups() or broker.services.group_configs.unsaved() is not None:
            assert asyncio.get_running_loop().time() < deadline, len(offsets.partitions(GROUP))
            await asyncio.sleep(0.02)
    assert offsets.partitions(GROUP) == []
    path = broker.config.data_dir / "share-group-configs.json"
    assert GROUP not in json.loads(path.read_text())
