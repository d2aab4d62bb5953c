"""`shoal serve --processes 2`: group and transaction requests sent to the node that does not
coordinate their key (issue 33, promise 4).

Raw requests (Shoal's own `Connection`, kio) to node 0 for a consumer group, a share group and
a transactional id that node 1 coordinates get NOT_COORDINATOR and leave nothing on node 0, as
a Kafka broker answers for a key whose coordinator partition it does not own (the group
coordinator's `CoordinatorRuntime` / `GroupCoordinatorService`; the transaction coordinator's
`TransactionStateManager.getTransactionState`). Before, node 0 served them: it made a second
group of the same name (its own members and assignment), took offsets node 1 never reads, and
began a transaction node 1 knew nothing of. Then confluent-kafka's unchanged transactional
Producer, Consumer and ShareConsumer, bootstrapped on node 0 alone, find node 1 with
FindCoordinator and work end to end; node 1 holds the groups (DescribeGroups,
ShareGroupDescribe) and node 0 lists none of them.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from kio.schema.alter_share_group_offsets.v0 import request as alter_share
from kio.schema.describe_groups.v5 import request as describe_groups
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as init_pid
from kio.schema.join_group.v9 import request as join_group
from kio.schema.list_groups.v5 import request as list_groups
from kio.schema.offset_commit.v9 import request as commit
from kio.schema.share_group_describe.v1 import request as share_describe
from kio.schema.share_group_heartbeat.v1 import request as share_heartbeat

from client.connection import Connection
from protocol.messages import build
from tests.compat.support import QUIET
from tests.compat.support import create_topic
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs
from tests.compat.support import share_consumer
from tests.compat.test_processes import start_two

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC, PARTITIONS = "jobs", 4
MINUTE = datetime.timedelta(minutes=1)


def _on_node_1(prefix: str) -> str:
    return next(f"{prefix}{i}" for i in range(100) if zlib.crc32(f"{prefix}{i}".encode()) % 2 == 1)


GROUP, SHARE_GROUP, TXN = _on_node_1("audit"), _on_node_1("workers"), _on_node_1("ledger")


async def _ask(port: int, *bodies: Any) -> list[Any]:
    conn = await Connection.open("127.0.0.1", port)
    try:
        return [await conn.request(body) for body in bodies]
    finally:
        await conn.close()


def ask(port: int, *bodies: Any) -> list[Any]:
    return asyncio.run(_ask(port, *bodies))


def _listed(port: int) -> set[str]:
    (answer,) = ask(port, build(list_groups.ListGroupsRequest))
    return {g.group_id for g in answer.groups}


def _refused_on_node_0(port: int) -> None:
    protocol = build(join_group.JoinGroupRequestProtocol, name="range", metadata=b"")
    start = build(alter_share.AlterShareGroupOffsetsRequestPartition, partition_index=0,
                  start_offset=0)  # fmt: skip
    one = build(commit.OffsetCommitRequestPartition, partition_index=0, committed_offset=1)
    joined, shared, altered, init, committed = ask(
        port,
        build(join_group.JoinGroupRequest, group_id=GROUP, session_timeout=MINUTE,
              rebalance_timeout=MINUTE, member_id="", protocol_type="consumer",
              protocols=(protocol,)),
        build(share_heartbeat.ShareGroupHeartbeatRequest, group_id=SHARE_GROUP, member_id="m1",
              member_epoch=0, subscribed_topic_names=(TOPIC,)),
        build(alter_share.AlterShareGroupOffsetsRequest, group_id=SHARE_GROUP,
              topics=(build(alter_share.AlterShareGroupOffsetsRequestTopic, topic_name=TOPIC,
                            partitions=(start,)),)),
        build(init_pid.InitProducerIdRequest, transactional_id=TXN, transaction_timeout=MINUTE,
              producer_id=-1, producer_epoch=-1),
        build(commit.OffsetCommitRequest, group_id=GROUP, generation_id_or_member_epoch=-1,
              member_id="",
              topics=(build(commit.OffsetCommitRequestTopic, name=TOPIC, partitions=(one,)),)),
    )  # fmt: skip
    assert joined.error_code == ErrorCode.not_coordinator
    assert shared.error_code == ErrorCode.not_coordinator
    assert altered.error_code == ErrorCode.not_coordinator
    assert init.error_code == ErrorCode.not_coordinator
    assert [p.error_code for t in committed.topics for p in t.partitions] == [
        ErrorCode.not_coordinator
    ]
    assert not _listed(port) & {GROUP, SHARE_GROUP}


def test_requests_on_the_wrong_node_and_clients_bootstrapped_there(tmp_path: Path) -> None:
    broker, _ = start_two(tmp_path / "data")
    node0, node1 = broker.port, broker.port + 1
    only0 = f"127.0.0.1:{node0}"
    try:
        create_topic(only0, TOPIC, PARTITIONS, timeout=30)
        set_group_configs(only0, SHARE_GROUP, {"share.auto.offset.reset": "earliest"})
        _refused_on_node_0(node0)

        # A transaction coordinated by node 1, over partitions both nodes lead.
        producer = Producer({"bootstrap.servers": only0, "transactional.id": TXN, **QUIET})
        producer.init_transactions(30)
        producer.begin_transaction()
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"%d" % p, partition=p)
        producer.commit_transaction(30)

        consumer = Consumer(
            {"bootstrap.servers": only0, "group.id": GROUP, "auto.offset.reset": "earliest",
             "enable.auto.commit": False, "isolation.level": "read_committed", **QUIET}
        )  # fmt: skip
        consumer.subscribe([TOPIC])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < PARTITIONS and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
        assert sorted(got) == [b"%d" % p for p in range(PARTITIONS)]
        consumer.commit(asynchronous=False)
        wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        assert all(tp.offset > 0 for tp in consumer.committed(wanted, 20))
        (described,) = ask(node1, build(describe_groups.DescribeGroupsRequest, groups=(GROUP,)))
        assert described.groups[0].error_code == ErrorCode.none
        assert len(described.groups[0].members) == 1  # node 1 holds the member

        sharer = share_consumer(only0, SHARE_GROUP)
        sharer.subscribe([TOPIC])
        shared: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(shared) < PARTITIONS and time.monotonic() < deadline:
            shared += [m.value() for m in poll_records(sharer)]
        assert sorted(shared) == sorted(got)
        (share_group,) = ask(
            node1, build(share_describe.ShareGroupDescribeRequest, group_ids=(SHARE_GROUP,),
                         include_authorized_operations=False)
        )  # fmt: skip
        assert share_group.groups[0].error_code == ErrorCode.none
        assert len(share_group.groups[0].members) == 1

        _refused_on_node_0(node0)  # node 0 still makes nothing while node 1 holds them
        assert {GROUP, SHARE_GROUP} <= _listed(node1)
        sharer.close()
        consumer.close()
        assert broker.stop(60) == 0
    finally:
        broker.stop(60)
