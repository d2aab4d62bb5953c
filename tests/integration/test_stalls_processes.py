"""No request holds either node of `shoal serve --processes 2` for long (issue 33, promise 3).

`test_stalls` sends each API's worst request to a broker of one process. With N > 1 other code
runs: the wrong node's NOT_COORDINATOR answers (per group, per partition:
`broker/handlers/common.not_coordinator`), NOT_LEADER_OR_FOLLOWER for partitions led elsewhere,
the controller's writes forwarded by node 1 to node 0 (`broker/controller_forward.py`,
auto-creation), the share-group admin APIs' per-leader RPCs (`broker/share_admin_remote.py`)
and the share-state RPCs a leader answers (`broker/share_state_peer.py`). So each request of
`stall_cases` goes to the node where it does the most: the node that does NOT coordinate its
group or transactional id, node 1 for what node 0 alone writes and for the rest; and the
share-group admin requests also go to their coordinator over a topic of `WIDE` partitions,
half of them led by the other node, which the coordinator asks. A probe times ApiVersions round
trips on EACH node (a stall may be on the node the work is sent to), with `test_stalls`'
limit: under ten times the probe's worst before the request, or `Probe.LIMIT_S`.

`make test` sends each case's `quick` size; `make stalls` (SHOAL_STALLS=full) the `full` ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import socket
import time
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kio.schema.add_partitions_to_txn.v5 import request as add_partitions_v5
from kio.schema.delete_groups.v2 import request as delete_groups_v2
from kio.schema.delete_share_group_offsets.v0 import request as delete_offsets_v0
from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v1 import request as offset_fetch_v1
from kio.schema.share_fetch.v1 import request as fetch_v1
from kio.schema.share_group_heartbeat.v1 import request as hb_v1

from broker.ownership import Ownership
from client import Admin
from client import ConfigResourceType
from client import Producer
from client.connection import Connection
from client.errors import TopicError
from protocol.framing import frame as framed
from protocol.messages import build
from protocol.messages import encode_request
from protocol.wire import INT32
from tests.big_frames import grown
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import node_pids
from tests.brokers import wait_for_nodes
from tests.integration import stall_cases as sc
from tests.integration.stall_cases import CASES
from tests.integration.stall_cases import Env
from tests.integration.stall_cases import Hostile
from tests.probe import Probe
from tests.probe import read_frame

pytestmark = [pytest.mark.integration, pytest.mark.latency]
K = 1_000
FULL = os.environ.get("SHOAL_STALLS") == "full"
TOPIC, PARTITIONS, GROUP, MEMBER = "stall", 8, "stall-share", "s" * 22
# A topic whose share-partitions the coordinator of a share group asks the other node about
# (each costs two fsyncs to make: the full size is Kafka's max.partitions.per.request).
WIDE_TOPIC, WIDE = "stall-wide", (10_000 if FULL else 1_000)
ADMIN_GROUP = "stall-empty-share"  # the share group the admin requests start and delete
BASELINE_S, BASELINE_ROUND_TRIPS = 0.5, 40
TIMES_BASELINE = 10
NODES = 2
OWNER = Ownership(0, NODES)
BROKER_CONFIG = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
# The group or transactional id each keyed request names (stall_cases): sent to the node that
# does not coordinate it, where it is answered NOT_COORDINATOR (requests naming many groups
# or ids, half of each node's, go to node 1 as the rest).
KEYS = {
    "offset_commit": "stall-group",
    "offset_fetch": "stall-group",
    "offset_delete": "stall-group",
    "join_group": "stall-join",
    "sync_group": "stall-join",
    "leave_group": "stall-join",
    "consumer_group_heartbeat": "stall-consumer",
    "share_group_heartbeat": "stall-share-hb",
    "describe_share_group_offsets": GROUP,
    "alter_share_group_offsets": ADMIN_GROUP,
    "delete_share_group_offsets": ADMIN_GROUP,
    "add_partitions_to_txn": "stall-txn",
    "txn_offset_commit": "stall-group",
    "txn_share_acknowledge": "stall-txn",  # a leader that asks the coordinator to verify
    "offset_fetch_v1": "stall-group",
    "add_partitions_to_txn_v5": "stall-txn",
}


@dataclass(frozen=True)
class Sent:
    """A request of `case` to `node`, over the topic `wide` or not."""

    case: Hostile
    node: int
    size: int
    wide: bool = False


def _wrong_node(case: Hostile) -> int:
    key = KEYS.get(case.name)
    return 1 if key is None else 1 - OWNER.coordinator(key)


def _sized(case: Hostile) -> int | None:
    return case.full if FULL else case.quick


def _delete_wide_offsets(env: Env, n: int) -> bytes:
    """DeleteShareGroupOffsets of the share group's every share-partition of one topic."""
    m = delete_offsets_v0
    topic = build(m.DeleteShareGroupOffsetsRequestTopic, topic_name=env.topic)
    body = build(m.DeleteShareGroupOffsetsRequest, group_id=ADMIN_GROUP, topics=(topic,))
    return framed(encode_request(body, 1, "stall-test"))


def _delete_share_group(env: Env, n: int) -> bytes:
    """DeleteGroups of the empty share group, started on every partition of the wide topic."""
    body = build(delete_groups_v2.DeleteGroupsRequest, groups_names=(ADMIN_GROUP,))
    return framed(encode_request(body, 1, "stall-test"))


def _offset_fetch_v1(env: Env, n: int) -> bytes:
    """OffsetFetch v1 of `n` partitions: on the wrong node each partition asked carries
    NOT_COORDINATOR (`OffsetFetchRequest.getErrorResponse`; main's 0428991 slices it)."""
    m = offset_fetch_v1
    topic = build(m.OffsetFetchRequestTopic, name=env.topic, partition_indexes=(sc.SENTINEL,))
    body = build(m.OffsetFetchRequest, group_id="stall-group", topics=(topic,))
    return grown(body, sc.SENTINEL_BYTES, n, sc.SENTINEL_BYTES, INT32.pack)


def _add_partitions_v5(env: Env, n: int) -> bytes:
    """A broker's AddPartitionsToTxn v5 (verify_only), one transaction of `n` partitions: on
    the wrong node each carries NOT_COORDINATOR."""
    m = add_partitions_v5
    topic = build(m.AddPartitionsToTxnTopic, name=env.topic, partitions=(sc.SENTINEL,))
    txn = build(m.AddPartitionsToTxnTransaction, transactional_id="stall-txn", producer_id=0,
                producer_epoch=0, verify_only=True, topics=(topic,))  # fmt: skip
    body = build(m.AddPartitionsToTxnRequest, transactions=(txn,))
    return grown(body, sc.SENTINEL_BYTES, n, sc.SENTINEL_BYTES, INT32.pack)


def _wide(name: str, key: int, version: int, make: Callable[[Env, int], bytes]) -> Hostile:
    return Hostile("share groups", name, key, version, make, full=WIDE, quick=WIDE)


_COORDINATOR = OWNER.coordinator(ADMIN_GROUP)
# At the coordinator, over every partition of the wide topic, in this order: share-partitions
# started (InitializeShareGroupState to the other node), described (ReadShareGroupStateSummary),
# deleted (DeleteShareGroupState), started again, and the group deleted.
WIDE_SENT = [
    Sent(_wide("alter_share_group_offsets", 91, 0, sc.alter_share_group_offsets), _COORDINATOR,
         WIDE, wide=True),
    Sent(_wide("describe_share_group_offsets", 90, 1, sc.describe_share_group_offsets),
         _COORDINATOR, WIDE, wide=True),
    Sent(_wide("delete_share_group_offsets", 92, 0, _delete_wide_offsets), _COORDINATOR, 1,
         wide=True),
    Sent(_wide("alter_share_group_offsets", 91, 0, sc.alter_share_group_offsets), _COORDINATOR,
         WIDE, wide=True),
    Sent(_wide("delete_groups", 42, 2, _delete_share_group), _COORDINATOR, 1, wide=True),
]  # fmt: skip
# The wrong node's answers per partition of requests `stall_cases` sends in another version.
WRONG_NODE_SENT = [
    Hostile("offsets", "offset_fetch_v1", 9, 1, _offset_fetch_v1, quick=50 * K),
    Hostile("transactions", "add_partitions_to_txn_v5", 24, 5, _add_partitions_v5,
            quick=50 * K),
]  # fmt: skip
SENT = [
    Sent(c, _wrong_node(c), size)
    for c in [*CASES, *WRONG_NODE_SENT]
    if (size := _sized(c)) is not None
] + WIDE_SENT


def _id(sent: Sent) -> str:
    return f"{sent.case.name}{'-wide' if sent.wide else ''}-node{sent.node}"


@dataclass(frozen=True)
class Prepared:
    """The broker of the module, its nodes' pids at the start, what requests name."""

    broker: BrokerProcess
    pids: dict[int, int]  # node id -> pid at the start
    env: Env
    wide: Env


async def _setup(port: int) -> tuple[Env, Env]:
    """A topic with records on partition 0 and a share-group member holding them (at the
    group's coordinator and the partition's leader); the wide topic."""
    bootstrap = f"127.0.0.1:{port}"
    async with Admin(bootstrap) as admin:
        topic_id = await admin.create_topic(TOPIC, PARTITIONS)
        wide_id = await admin.create_topic(WIDE_TOPIC, WIDE)
        await admin.incremental_alter_configs(
            ConfigResourceType.GROUP, GROUP, {"share.auto.offset.reset": "earliest"}
        )
    assert topic_id is not None and wide_id is not None
    async with Producer(bootstrap) as producer:
        deadline = time.monotonic() + 30
        while True:  # until the leader has followed the topic node 0 made (each second)
            try:
                await producer.send(TOPIC, b"0", partition=0)
                break
            except TopicError:
                assert time.monotonic() < deadline, "the topic never reached its leader"
                await asyncio.sleep(0.1)
        for i in range(1, 20):
            await producer.send(TOPIC, b"%d" % i, partition=0)
    await _hold_records(port, topic_id)
    return Env(TOPIC, topic_id, GROUP, MEMBER), Env(WIDE_TOPIC, wide_id, ADMIN_GROUP, MEMBER)


async def _hold_records(port: int, topic_id: uuid.UUID) -> None:
    coordinator = await Connection.open("127.0.0.1", port + OWNER.coordinator(GROUP))
    leader = await Connection.open("127.0.0.1", port + OWNER.leader(topic_id, 0))
    try:
        joined = await coordinator.request(
            build(hb_v1.ShareGroupHeartbeatRequest, group_id=GROUP, member_id=MEMBER,
                  member_epoch=0, subscribed_topic_names=(TOPIC,))
        )  # fmt: skip
        assert joined.error_code == ErrorCode.none
        m = fetch_v1
        deadline = time.monotonic() + 30
        while True:  # the leader reads the group config node 0 wrote (followed each second)
            opened = await leader.request(
                build(m.ShareFetchRequest, group_id=GROUP, member_id=MEMBER,
                      share_session_epoch=0, max_wait=datetime.timedelta(milliseconds=10),
                      max_bytes=1 << 20, max_records=500, batch_size=500,
                      forgotten_topics_data=(),
                      topics=(build(m.FetchTopic, topic_id=topic_id,
                                    partitions=(build(m.FetchPartition, partition_index=0),)),))
            )  # fmt: skip
            if opened.responses and opened.responses[0].partitions[0].acquired_records:
                return
            assert time.monotonic() < deadline, f"no records acquired: {opened}"
            await leader.request(
                build(m.ShareFetchRequest, group_id=GROUP, member_id=MEMBER,
                      share_session_epoch=-1, max_wait=datetime.timedelta(0), max_bytes=0,
                      max_records=0, batch_size=0, forgotten_topics_data=(), topics=())
            )  # fmt: skip
            await asyncio.sleep(0.2)
    finally:
        await coordinator.close()
        await leader.close()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prepared]:
    """One `--processes 2` broker for every request of the module (each builds on what is
    there), with BROKER_CONFIG."""
    data: Path = tmp_path_factory.mktemp("stalls_processes") / "data"
    broker = configured_broker(data, BROKER_CONFIG)
    broker.port = free_ports(NODES)
    broker.extra += ["--processes", str(NODES)]
    broker.start(timeout=90)
    try:
        pids = wait_for_nodes(broker, NODES, timeout=90)
        env, wide = asyncio.run(_setup(broker.port))
        yield Prepared(broker, pids, env, wide)
    finally:
        broker.stop(60)  # SIGTERM: the supervisor stops its nodes


@contextlib.contextmanager
def _probes(port: int) -> Iterator[list[Probe]]:
    with Probe(port, timeout=600) as p0, Probe(port + 1, timeout=600) as p1:
        yield [p0, p1]


@pytest.mark.parametrize("sent", [pytest.param(s, id=_id(s)) for s in SENT])
def test_the_worst_request_leaves_both_nodes_serving_others(prepared: Prepared, sent: Sent) -> None:
    broker = prepared.broker
    frame = sent.case.build(prepared.wide if sent.wide else prepared.env, sent.size)
    with (
        socket.create_connection(("127.0.0.1", broker.port + sent.node), timeout=600) as sock,
        _probes(broker.port) as probes,
    ):
        deadline = time.monotonic() + BASELINE_S
        for probe in probes:
            probe.wait_for(BASELINE_ROUND_TRIPS)
        while time.monotonic() < deadline:
            time.sleep(0.01)
        before = [len(p.round_trips) for p in probes]
        baseline = max(max(p.round_trips) for p in probes)
        started = time.monotonic()
        sock.sendall(frame)
        answer = read_frame(sock)
        took = time.monotonic() - started
        for probe in probes:  # the round trip under way when the answer came
            probe.wait_for(len(probe.round_trips) + 2)
        during = [p.round_trips[b:] for p, b in zip(probes, before, strict=True)]
    assert int.from_bytes(answer[:4], "big") == 1
    worst = [max(d) for d in during]
    limit = max(TIMES_BASELINE * baseline, Probe.LIMIT_S)
    print(
        f"{_id(sent)} x{sent.size}: answered in {took:.2f}s; probe worst node 0 "
        f"{worst[0] * 1e3:.0f} ms, node 1 {worst[1] * 1e3:.0f} ms "
        f"(baseline worst {baseline * 1e3:.1f} ms)"
    )
    for node, w in enumerate(worst):
        assert w < limit, (
            f"{_id(sent)}: a client of node {node} waited {w * 1e3:.0f} ms "
            f"(limit {limit * 1e3:.0f} ms); slowest: {sorted(during[node])[-5:]}"
        )
    assert broker.proc is not None and broker.proc.poll() is None
    assert node_pids(broker) == prepared.pids, broker.log()[-3000:]  # neither node restarted


def test_every_keyed_case_is_sent_to_the_wrong_node() -> None:
    """A case renamed in stall_cases stays keyed here."""
    assert set(KEYS) <= {c.name for c in [*CASES, *WRONG_NODE_SENT]}
