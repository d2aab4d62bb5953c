"""Coordinator requests sent to a node of `--processes 2` that does not coordinate their key
(one in-process node 0, raw requests over Shoal's own `Connection`): every API keyed by a group
id or a transactional id coordinated by node 1 is answered NOT_COORDINATOR, where the version
carries it, and node 0 makes no state for it.

Kafka's answer on a broker that is not the key's coordinator: the group coordinator's
`CoordinatorRuntime` throws NotCoordinatorException for a `__consumer_offsets` shard not loaded
there, which `GroupCoordinatorService` turns into NOT_COORDINATOR at the top level (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetDelete, ConsumerGroupHeartbeat, ShareGroupHeartbeat,
Alter/DeleteShareGroupOffsets), per group (DescribeGroups, DeleteGroups, OffsetFetch v8+,
ConsumerGroupDescribe, ShareGroupDescribe, DescribeShareGroupOffsets) or per partition
(OffsetCommit, TxnOffsetCommit; OffsetFetch v0-1, whose response has no top-level code:
`OffsetFetchResponse.groupError`, which `KafkaApis.fetchOffsetsForGroup` answers a failed group
with; in older Kafka `OffsetFetchRequest.getErrorResponse`). The transaction coordinator's
`TransactionStateManager.getTransactionState` answers NOT_COORDINATOR for an id whose
`__transaction_state` partition it does not own (InitProducerId, AddPartitionsToTxn per
partition, AddOffsetsToTxn, EndTxn, DescribeTransactions per id). Clients then ask
FindCoordinator again and retry there.
"""

from __future__ import annotations

import datetime
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v3 import request as add_offsets
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.add_partitions_to_txn.v5 import request as add_v5
from kio.schema.alter_share_group_offsets.v0 import request as alter_share
from kio.schema.consumer_group_describe.v1 import request as cg_describe
from kio.schema.consumer_group_heartbeat.v0 import request as cg_heartbeat
from kio.schema.delete_groups.v2 import request as delete_groups
from kio.schema.delete_share_group_offsets.v0 import request as delete_share
from kio.schema.describe_groups.v5 import request as describe_groups
from kio.schema.describe_share_group_offsets.v1 import request as describe_share
from kio.schema.describe_transactions.v0 import request as describe_txns
from kio.schema.end_txn.v3 import request as end_txn
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4 import request as heartbeat
from kio.schema.init_producer_id.v4 import request as init_pid
from kio.schema.join_group.v9 import request as join_group
from kio.schema.leave_group.v0 import request as leave_v0
from kio.schema.leave_group.v5 import request as leave_v5
from kio.schema.list_groups.v5 import request as list_groups
from kio.schema.list_transactions.v1 import request as list_txns
from kio.schema.offset_commit.v9 import request as commit
from kio.schema.offset_delete.v0 import request as offset_delete
from kio.schema.offset_fetch.v1 import request as fetch_v1
from kio.schema.offset_fetch.v7 import request as fetch_v7
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.schema.share_group_describe.v1 import request as share_describe
from kio.schema.share_group_heartbeat.v1 import request as share_heartbeat
from kio.schema.sync_group.v5 import request as sync_group
from kio.schema.txn_offset_commit.v3 import request as txn_commit

from broker.server import Server
from client.admin import Admin
from client.connection import Connection
from protocol.consumer_offsets import OffsetValue
from protocol.messages import build
from tests.brokers import free_ports
from tests.brokers import make_server

pytestmark = pytest.mark.integration

TOPIC = "orders"
MINUTE = datetime.timedelta(minutes=1)
NOT_COORDINATOR = ErrorCode.not_coordinator


def _on(node: int, prefix: str) -> str:
    return next(
        f"{prefix}{i}" for i in range(100) if zlib.crc32(f"{prefix}{i}".encode()) % 2 == node
    )


GROUP, TXN = _on(1, "g"), _on(1, "t")  # coordinated by node 1
LOCAL_GROUP, LOCAL_TXN = _on(0, "g"), _on(0, "t")  # by node 0, the one running


@pytest.fixture
async def node0(tmp_path: Path) -> AsyncIterator[tuple[Server, Connection]]:
    """Node 0 of `--processes 2` alone (node 1 is not needed: nothing is forwarded), with a
    topic of 2 partitions, and a connection to it."""
    port = free_ports(2)
    server = make_server(
        tmp_path, listeners=f"PLAINTEXT://127.0.0.1:{port}", processes=2, **{"node.id": 0}
    )
    await server.start()
    server.services.logs.create_topic(TOPIC, 2)
    conn = await Connection.open("127.0.0.1", port)
    try:
        yield server, conn
    finally:
        await conn.close()
        await server.stop()


def _nothing_made(server: Server, group: str = GROUP, txn: str = TXN) -> None:
    s = server.services
    assert group not in s.classic_groups.coordinator.groups
    assert group not in s.consumer_groups.groups
    assert group not in s.coordinator.groups  # share groups
    assert s.share_group_admin.group(group) is None
    assert not s.offsets.has_group(group)
    assert txn not in s.transactions.txns


async def _listed(conn: Connection) -> list[str]:
    answer = await conn.request(build(list_groups.ListGroupsRequest))
    return [g.group_id for g in answer.groups]


def _partition_codes(topics: Any) -> set[ErrorCode]:
    return {ErrorCode(p.error_code) for t in topics for p in t.partitions}


async def test_classic_groups_and_offsets_on_the_wrong_node(
    node0: tuple[Server, Connection],
) -> None:
    server, conn = node0
    protocol = build(join_group.JoinGroupRequestProtocol, name="range", metadata=b"")
    joined = await conn.request(
        build(join_group.JoinGroupRequest, group_id=GROUP, session_timeout=MINUTE,
              rebalance_timeout=MINUTE, member_id="", protocol_type="consumer",
              protocols=(protocol,))
    )  # fmt: skip
    assert joined.error_code == NOT_COORDINATOR
    synced = await conn.request(
        build(sync_group.SyncGroupRequest, group_id=GROUP, generation_id=1, member_id="m",
              assignments=())
    )  # fmt: skip
    assert synced.error_code == NOT_COORDINATOR
    beat = await conn.request(
        build(heartbeat.HeartbeatRequest, group_id=GROUP, generation_id=1, member_id="m")
    )
    assert beat.error_code == NOT_COORDINATOR
    left = await conn.request(build(leave_v0.LeaveGroupRequest, group_id=GROUP, member_id="m"))
    assert left.error_code == NOT_COORDINATOR
    member = build(leave_v5.MemberIdentity, member_id="m")
    left = await conn.request(build(leave_v5.LeaveGroupRequest, group_id=GROUP, members=(member,)))
    assert left.error_code == NOT_COORDINATOR

    # A simple consumer's commit (member "", generation -1) would be taken by any node.
    partition = build(commit.OffsetCommitRequestPartition, partition_index=0, committed_offset=5)
    topic = build(commit.OffsetCommitRequestTopic, name=TOPIC, partitions=(partition,))
    committed = await conn.request(
        build(commit.OffsetCommitRequest, group_id=GROUP, generation_id_or_member_epoch=-1,
              member_id="", topics=(topic,))
    )  # fmt: skip
    assert _partition_codes(committed.topics) == {NOT_COORDINATOR}

    asked = build(fetch_v1.OffsetFetchRequestTopic, name=TOPIC, partition_indexes=(0, 1))
    old = await conn.request(build(fetch_v1.OffsetFetchRequest, group_id=GROUP, topics=(asked,)))
    assert _partition_codes(old.topics) == {NOT_COORDINATOR}  # v1: no top-level code
    assert [p.committed_offset for t in old.topics for p in t.partitions] == [-1, -1]
    asked7 = build(fetch_v7.OffsetFetchRequestTopic, name=TOPIC, partition_indexes=(0,))
    one = await conn.request(build(fetch_v7.OffsetFetchRequest, group_id=GROUP, topics=(asked7,)))
    assert one.error_code == NOT_COORDINATOR and not one.topics
    groups = (
        build(fetch_v8.OffsetFetchRequestGroup, group_id=GROUP, topics=None),
        build(fetch_v8.OffsetFetchRequestGroup, group_id=LOCAL_GROUP, topics=None),
    )
    several = await conn.request(build(fetch_v8.OffsetFetchRequest, groups=groups))
    codes = {g.group_id: ErrorCode(g.error_code) for g in several.groups}
    assert codes == {GROUP: NOT_COORDINATOR, LOCAL_GROUP: ErrorCode.none}  # per group

    first = build(offset_delete.OffsetDeleteRequestPartition, partition_index=0)
    gone = build(offset_delete.OffsetDeleteRequestTopic, name=TOPIC, partitions=(first,))
    deleted = await conn.request(
        build(offset_delete.OffsetDeleteRequest, group_id=GROUP, topics=(gone,))
    )
    assert deleted.error_code == NOT_COORDINATOR

    described = await conn.request(
        build(describe_groups.DescribeGroupsRequest, groups=(GROUP, LOCAL_GROUP))
    )
    codes = {g.group_id: ErrorCode(g.error_code) for g in described.groups}
    assert codes == {GROUP: NOT_COORDINATOR, LOCAL_GROUP: ErrorCode.none}  # v5: Dead, no error
    dropped = await conn.request(build(delete_groups.DeleteGroupsRequest, groups_names=(GROUP,)))
    assert [ErrorCode(r.error_code) for r in dropped.results] == [NOT_COORDINATOR]

    _nothing_made(server)
    assert GROUP not in await _listed(conn)
    # Offsets a wrong node took before this change (durable in its own log) are not listed
    # there: ListGroups names only the groups the node coordinates.
    server.services.offsets.commit(GROUP, {(TOPIC, 0): OffsetValue(5)})
    server.services.offsets.commit(LOCAL_GROUP, {(TOPIC, 0): OffsetValue(5)})
    listed = await _listed(conn)
    assert GROUP not in listed and LOCAL_GROUP in listed
    # A group node 0 coordinates is served as before: JoinGroup v9 asks for a member id.
    mine = await conn.request(
        build(join_group.JoinGroupRequest, group_id=LOCAL_GROUP, session_timeout=MINUTE,
              rebalance_timeout=MINUTE, member_id="", protocol_type="consumer",
              protocols=(protocol,))
    )  # fmt: skip
    assert mine.error_code == ErrorCode.member_id_required


async def test_consumer_and_share_groups_on_the_wrong_node(
    node0: tuple[Server, Connection],
) -> None:
    server, conn = node0
    beat = await conn.request(
        build(cg_heartbeat.ConsumerGroupHeartbeatRequest, group_id=GROUP, member_id="",
              member_epoch=0, rebalance_timeout=MINUTE, subscribed_topic_names=(TOPIC,),
              topic_partitions=())
    )  # fmt: skip
    assert beat.error_code == NOT_COORDINATOR
    described = await conn.request(
        build(cg_describe.ConsumerGroupDescribeRequest, group_ids=(GROUP,),
              include_authorized_operations=False)
    )  # fmt: skip
    assert [ErrorCode(g.error_code) for g in described.groups] == [NOT_COORDINATOR]

    joined = await conn.request(
        build(share_heartbeat.ShareGroupHeartbeatRequest, group_id=GROUP, member_id="m1",
              member_epoch=0, subscribed_topic_names=(TOPIC,))
    )  # fmt: skip
    assert joined.error_code == NOT_COORDINATOR
    described = await conn.request(
        build(share_describe.ShareGroupDescribeRequest, group_ids=(GROUP,),
              include_authorized_operations=False)
    )  # fmt: skip
    assert [ErrorCode(g.error_code) for g in described.groups] == [NOT_COORDINATOR]

    topic = build(describe_share.DescribeShareGroupOffsetsRequestTopic, topic_name=TOPIC,
                  partitions=(0,))  # fmt: skip
    group = build(describe_share.DescribeShareGroupOffsetsRequestGroup, group_id=GROUP,
                  topics=(topic,))  # fmt: skip
    offsets = await conn.request(
        build(describe_share.DescribeShareGroupOffsetsRequest, groups=(group,))
    )
    assert [ErrorCode(g.error_code) for g in offsets.groups] == [NOT_COORDINATOR]
    start = build(alter_share.AlterShareGroupOffsetsRequestPartition, partition_index=0,
                  start_offset=0)  # fmt: skip
    altered = await conn.request(
        build(alter_share.AlterShareGroupOffsetsRequest, group_id=GROUP,
              topics=(build(alter_share.AlterShareGroupOffsetsRequestTopic, topic_name=TOPIC,
                            partitions=(start,)),))
    )  # fmt: skip
    assert altered.error_code == NOT_COORDINATOR  # before: the group was made here
    dropped = await conn.request(
        build(delete_share.DeleteShareGroupOffsetsRequest, group_id=GROUP,
              topics=(build(delete_share.DeleteShareGroupOffsetsRequestTopic, topic_name=TOPIC),))
    )  # fmt: skip
    assert dropped.error_code == NOT_COORDINATOR

    _nothing_made(server)
    assert GROUP not in await _listed(conn)


async def test_transactions_on_the_wrong_node(node0: tuple[Server, Connection]) -> None:
    server, conn = node0
    init = await conn.request(
        build(init_pid.InitProducerIdRequest, transactional_id=TXN, transaction_timeout=MINUTE,
              producer_id=-1, producer_epoch=-1)
    )  # fmt: skip
    assert init.error_code == NOT_COORDINATOR and init.producer_id == -1
    topic = build(add_v3.AddPartitionsToTxnTopic, name=TOPIC, partitions=(0, 1))
    added = await conn.request(
        build(add_v3.AddPartitionsToTxnRequest, v3_and_below_transactional_id=TXN,
              v3_and_below_producer_id=7, v3_and_below_producer_epoch=0,
              v3_and_below_topics=(topic,))
    )  # fmt: skip
    codes = {
        ErrorCode(p.partition_error_code)
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert codes == {NOT_COORDINATOR}
    one = build(add_v5.AddPartitionsToTxnTopic, name=TOPIC, partitions=(0,))
    txn = build(add_v5.AddPartitionsToTxnTransaction, transactional_id=TXN, producer_id=7,
                producer_epoch=0, verify_only=True, topics=(one,))  # fmt: skip
    verified = await conn.request(build(add_v5.AddPartitionsToTxnRequest, transactions=(txn,)))
    codes = {
        ErrorCode(p.partition_error_code)
        for t in verified.results_by_transaction
        for r in t.topic_results
        for p in r.results_by_partition
    }
    assert codes == {NOT_COORDINATOR}
    offsets = await conn.request(
        build(add_offsets.AddOffsetsToTxnRequest, transactional_id=TXN, producer_id=7,
              producer_epoch=0, group_id=LOCAL_GROUP)
    )  # fmt: skip
    assert offsets.error_code == NOT_COORDINATOR
    ended = await conn.request(
        build(end_txn.EndTxnRequest, transactional_id=TXN, producer_id=7, producer_epoch=0,
              committed=True)
    )  # fmt: skip
    assert ended.error_code == NOT_COORDINATOR
    described = await conn.request(
        build(describe_txns.DescribeTransactionsRequest, transactional_ids=(TXN, LOCAL_TXN))
    )
    codes = {s.transactional_id: ErrorCode(s.error_code) for s in described.transaction_states}
    assert codes == {TXN: NOT_COORDINATOR, LOCAL_TXN: ErrorCode.transactional_id_not_found}
    # TxnOffsetCommit goes to the group's coordinator, whoever coordinates the transaction.
    partition = build(txn_commit.TxnOffsetCommitRequestPartition, partition_index=0,
                      committed_offset=3)  # fmt: skip
    staged = await conn.request(
        build(txn_commit.TxnOffsetCommitRequest, transactional_id=LOCAL_TXN, group_id=GROUP,
              producer_id=7, producer_epoch=0, generation_id=-1, member_id="",
              topics=(build(txn_commit.TxnOffsetCommitRequestTopic, name=TOPIC,
                            partitions=(partition,)),))
    )  # fmt: skip
    assert _partition_codes(staged.topics) == {NOT_COORDINATOR}

    _nothing_made(server)
    listed = await conn.request(build(list_txns.ListTransactionsRequest, duration_filter=-1))
    assert not listed.transaction_states
    # An id node 0 coordinates is served as before.
    mine = await conn.request(
        build(init_pid.InitProducerIdRequest, transactional_id=LOCAL_TXN,
              transaction_timeout=MINUTE, producer_id=-1, producer_epoch=-1)
    )  # fmt: skip
    assert mine.error_code == ErrorCode.none and mine.producer_id >= 0
    # An id a wrong node began before this change (durable in its log) is not listed there.
    txns, now = server.services.transactions, server.services.now_ms()
    assert txns.init_producer_id(TXN, 60_000, None, now).error_code == ErrorCode.none
    listed = await conn.request(build(list_txns.ListTransactionsRequest, duration_filter=-1))
    assert [s.transactional_id for s in listed.transaction_states] == [LOCAL_TXN]


async def test_the_admin_client_sends_each_group_to_its_own_coordinator(tmp_path: Path) -> None:
    """Shoal's `client.Admin` with groups of both nodes in one call: each node is asked about
    its own (Kafka's AdminClient batches by coordinator, `CoordinatorStrategy`); before, every
    group went to the first one's coordinator and the others got NOT_COORDINATOR. ListGroups
    goes to every node, as Kafka's `listGroups` (before: one node, whose groups alone were
    listed)."""
    port = free_ports(2)
    nodes = [
        make_server(
            tmp_path, listeners=f"PLAINTEXT://127.0.0.1:{port + i}", processes=2, **{"node.id": i}
        )
        for i in (0, 1)
    ]
    for server in nodes:
        await server.start()
    try:
        async with Admin(f"127.0.0.1:{port}") as admin:
            errors = await admin.delete_groups([LOCAL_GROUP, GROUP])
            codes = {g: e.error_code if e else None for g, e in errors.items()}
            assert codes == {g: ErrorCode.group_id_not_found for g in (LOCAL_GROUP, GROUP)}
            await admin.create_topic(TOPIC, 2)
            nodes[1].services.logs.refresh_topics()  # not a second later: node 0 made it
            for group in (LOCAL_GROUP, GROUP):  # an empty share group on each node
                await admin.alter_share_group_offsets(group, {(TOPIC, 0): 0})
            listed = {g.group_id for g in await admin.list_groups(types=["share"])}
            assert listed == {LOCAL_GROUP, GROUP}  # every node asked: each lists its own
            described = await admin.describe_share_groups([LOCAL_GROUP, GROUP])
            assert {g: d.state for g, d in described.items()} == {
                LOCAL_GROUP: "Empty",
                GROUP: "Empty",
            }
    finally:
        for server in reversed(nodes):
            await server.stop()
