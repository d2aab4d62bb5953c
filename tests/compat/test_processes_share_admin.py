"""Share-group admin across `shoal serve --processes 2` (issue 33, docs/multicore.md).

A share group's coordinator is node `crc32(group) % 2`; its share-partitions' state lives
with each partition's leader, half of them on the other node. The coordinator asks the other
node with the share-state RPCs of KIP-932, as Kafka's group coordinator asks the share
coordinator through its persister (`GroupCoordinatorService.describeShareGroupOffsets`,
`alterShareGroupOffsets`, `deleteShareGroupOffsets`, `deleteShareGroups`; the RPCs
ReadShareGroupStateSummary, InitializeShareGroupState, DeleteShareGroupState). So every
partition is described, reset and deleted whichever node leads it, and a deleted group's state
and configs are gone everywhere.

confluent-kafka 2.16's AdminClient has no share-group offset APIs: those go through Shoal's own
`client.Admin` (as the CLI does); DeleteGroups and configs through confluent-kafka's
AdminClient, and records through its unchanged ShareConsumer and Producer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import zlib
from collections.abc import Awaitable
from collections.abc import Callable
from typing import Any
from typing import TypeVar

import pytest
from confluent_kafka import AcknowledgeType
from confluent_kafka import Consumer
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from kio.schema.errors import ErrorCode

from client import Admin
from client.errors import KafkaError as ClientKafkaError
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import admin
from tests.compat.support import create_topic
from tests.compat.support import describe_group_configs
from tests.compat.support import error_code
from tests.compat.support import explicit_consumer
from tests.compat.support import poll_records
from tests.compat.support import set_group_configs

pytestmark = [pytest.mark.compat, pytest.mark.slow]

TOPIC, PARTITIONS, FIRST, MORE = "jobs", 4, 40, 5
LOCK_MS = "45000"  # a group config besides share.auto.offset.reset, to see it go with the group
T = TypeVar("T")


def _coordinator(group: str) -> int:
    return zlib.crc32(group.encode()) % 2


def _group_on(node: int, prefix: str) -> str:
    """A group name whose coordinator is `node`."""
    return next(f"{prefix}{i}" for i in range(100) if _coordinator(f"{prefix}{i}") == node)


def _admin(bootstrap: str, call: Callable[[Admin], Awaitable[T]]) -> T:
    async def run() -> T:
        async with Admin(bootstrap) as a:
            return await call(a)

    return asyncio.run(run())


def _until_empty(bootstrap: str, call: Callable[[Admin], Awaitable[T]]) -> T:
    """`call`, again while the group still has the member that just closed (NON_EMPTY_GROUP)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return _admin(bootstrap, call)
        except ClientKafkaError as e:
            if e.error_code != ErrorCode.non_empty_group or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _produce(bootstrap: str, first: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(first, first + count):
        for part in range(PARTITIONS):
            p.produce(TOPIC, value=b"%d-%d" % (part, i), partition=part)
    assert p.flush(30) == 0


def _records(bootstrap: str, p: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition p, with a plain Consumer."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", **QUIET})
    c.assign([TopicPartition(TOPIC, p, 0)])
    out: list[tuple[int, bytes]] = []
    idle = 0
    while idle < 3:
        batch = c.consume(1000, timeout=1)
        idle = 0 if batch else idle + 1
        out += [(m.offset(), m.value()) for m in batch if m.error() is None]
    c.close()
    return out


def _consume(
    bootstrap: str, group: str, wanted: int, topic: str = TOPIC
) -> list[tuple[int, bytes, int]]:
    """(partition, value, delivery count) of `wanted` records, each ACCEPTed; then closed and
    the acknowledgements confirmed by the leaders (every record acknowledged)."""
    c = explicit_consumer(bootstrap, group, topic)
    got: list[tuple[int, bytes, int]] = []
    deadline = time.monotonic() + 90
    while len(got) < wanted and time.monotonic() < deadline:
        for m in poll_records(c, 0.3):
            got.append((m.partition(), m.value(), m.delivery_count()))
            c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync()
    extra = poll_records(c, 1.0)  # nothing more comes
    c.close()
    assert not extra, extra
    return got


def _describe(bootstrap: str, group: str, named: bool = True) -> dict[tuple[str, int], Any]:
    parts = [(TOPIC, p) for p in range(PARTITIONS)] if named else None
    return _until_empty(bootstrap, lambda a: a.describe_share_group_offsets(group, parts))


def _leaders(bootstrap: str) -> dict[int, int]:
    md = admin(bootstrap).list_topics(TOPIC, 20).topics[TOPIC]
    return {p.id: p.leader for p in md.partitions.values()}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Share groups start at the log start unless their configs say otherwise (the broker's
    `group.share.auto.offset.reset`): a deleted group's share-partitions start again there,
    as its tombstones record (the defaults when it was deleted)."""
    data = tmp_path_factory.mktemp("share-admin") / "data"
    broker = configured_broker(
        data, {**SHORT_SESSION_CONFIG, "group.share.auto.offset.reset": "earliest"}
    )
    broker.port = free_ports(2)
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    nodes = wait_for_nodes(broker, 2, timeout=90)
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS, timeout=30)
        leaders = _leaders(broker.bootstrap)
        assert sorted(set(leaders.values())) == [0, 1]  # each node leads two partitions
        _produce(broker.bootstrap, 0, FIRST)
        yield broker, nodes
    finally:
        broker.stop(60)


@pytest.mark.parametrize("home", [0, 1])
def test_describe_reset_and_delete_reach_every_partition(
    broker: tuple[BrokerProcess, dict[int, int]], home: int
) -> None:
    """With the group's coordinator on either node: describe reports every partition's SPSO
    and lag; a reset to earliest and to a given offset applies on both nodes (the next consumer
    gets the records again from there, on every partition); DeleteGroups forgets the share
    state on both nodes and the group's configs (node 0 alone writes them)."""
    b, _ = broker
    bootstrap = b.bootstrap
    group = _group_on(home, "admin-")
    set_group_configs(bootstrap, group, {"share.record.lock.duration.ms": LOCK_MS})
    before = {p: _records(bootstrap, p) for p in range(PARTITIONS)}  # earlier tests' records too
    got = _consume(bootstrap, group, sum(len(r) for r in before.values()))
    assert sorted(got) == sorted((p, v, 1) for p in range(PARTITIONS) for _, v in before[p])
    _produce(bootstrap, 1000 + home * 100, MORE)  # not consumed: the lag of every partition
    ends = {p: _records(bootstrap, p) for p in range(PARTITIONS)}

    # Describe: every partition, named or not, its SPSO past the records consumed, its lag MORE.
    for named in (True, False):
        described = _describe(bootstrap, group, named)
        assert sorted(described) == [(TOPIC, p) for p in range(PARTITIONS)]
        for (_, p), o in described.items():
            consumed = len(before[p])
            assert ends[p][consumed - 1][0] < o.start_offset <= ends[p][consumed][0], (p, o)
            assert o.lag == MORE and o.acquired == 0, (p, o)

    # Reset: on each node one partition to 0 (earliest), the other to its 10th record.
    leaders = _leaders(bootstrap)
    first = {n: min(q for q in leaders if leaders[q] == n) for n in (0, 1)}
    given = {p: 0 if first[leaders[p]] == p else ends[p][10][0] for p in range(PARTITIONS)}
    assert {leaders[p] for p in given if given[p] == 0} == {0, 1}
    _until_empty(bootstrap, lambda a: a.alter_share_group_offsets(
        group, {(TOPIC, p): o for p, o in given.items()}))  # fmt: skip
    described = _describe(bootstrap, group)
    assert {p: o.start_offset for (_, p), o in described.items()} == given
    expected = [(p, v) for p in range(PARTITIONS) for off, v in ends[p] if off >= given[p]]
    again = _consume(bootstrap, group, len(expected))
    assert sorted((p, v) for p, v, _ in again) == sorted(expected)

    # DeleteGroups: configs gone (defaults described), and a group made again under the name
    # starts every partition afresh: all records back, each with delivery count 1.
    client = admin(bootstrap)  # its futures fail if it is destroyed first
    deadline = time.monotonic() + 30
    while True:
        try:
            client.delete_consumer_groups([group], request_timeout=20)[group].result(30)
            break
        except KafkaException as e:  # the closed member may not have left yet
            assert error_code(e) == ErrorCode.non_empty_group and time.monotonic() < deadline
            time.sleep(0.2)
    configs = describe_group_configs(bootstrap, group)
    assert configs["share.record.lock.duration.ms"] != LOCK_MS
    with pytest.raises(ClientKafkaError) as e:
        _admin(bootstrap, lambda a: a.describe_share_group_offsets(group))
    assert e.value.error_code == ErrorCode.group_id_not_found
    total = sum(len(r) for r in ends.values())
    fresh = _consume(bootstrap, group, total)
    assert sorted((p, v) for p, v, _ in fresh) == sorted(
        (p, v) for p in range(PARTITIONS) for _, v in ends[p]
    )
    assert {c for _, _, c in fresh} == {1}

    # DeleteShareGroupOffsets: every partition of the topic forgotten, on both nodes.
    _until_empty(bootstrap, lambda a: a.delete_share_group_offsets(group, [TOPIC]))
    described = _describe(bootstrap, group)
    assert {p: o.start_offset for (_, p), o in described.items()} == dict.fromkeys(
        range(PARTITIONS), -1
    )


def test_a_stopped_leader_is_coordinator_not_available_within_the_timeout(
    broker: tuple[BrokerProcess, dict[int, int]],
) -> None:
    """The other node stopped (SIGSTOP): describe, reset, offset delete and DeleteGroups
    answer COORDINATOR_NOT_AVAILABLE for its partitions (the error Kafka's persister ends with
    when it cannot reach the share coordinator, `PersisterStateManager`) within the 5 s the
    coordinator waits, while it serves other requests; the group is kept, and once the node
    runs again every call succeeds."""
    b, nodes = broker
    bootstrap = b.bootstrap  # node 0: the group's coordinator, up throughout
    group = _group_on(0, "stopped-")
    _consume(bootstrap, group, sum(len(_records(bootstrap, p)) for p in range(PARTITIONS)))
    leaders = _leaders(bootstrap)
    starts = {(TOPIC, p): 0 for p in range(PARTITIONS)}
    os.kill(nodes[1], signal.SIGSTOP)
    try:
        calls: list[Callable[[Admin], Awaitable[Any]]] = [
            lambda a: a.describe_share_group_offsets(group, [(TOPIC, p) for p in range(4)]),
            lambda a: a.describe_share_group_offsets(group),
            lambda a: a.alter_share_group_offsets(group, starts),
            lambda a: a.delete_share_group_offsets(group, [TOPIC]),
        ]
        for call in calls:
            started = time.monotonic()
            with pytest.raises(ClientKafkaError) as e:
                _until_empty(bootstrap, call)
            assert e.value.error_code == ErrorCode.coordinator_not_available
            assert time.monotonic() - started < 15
        started = time.monotonic()
        errors = _admin(bootstrap, lambda a: a.delete_groups([group]))
        assert errors[group] is not None
        assert errors[group].error_code == ErrorCode.coordinator_not_available
        assert time.monotonic() - started < 15
        # Nothing held: node 0 answers at once meanwhile.
        started = time.monotonic()
        assert admin(bootstrap).list_topics(TOPIC, 10).topics[TOPIC].error is None
        assert time.monotonic() - started < 3
    finally:
        os.kill(nodes[1], signal.SIGCONT)
    # The group is still there; the reset took on node 0's partitions (each partition has its
    # own outcome, as in Kafka's AlterShareGroupOffsets answer). Node 1's may yet apply what
    # it read after SIGCONT: a request that timed out may still take effect, as in Kafka.
    described = _describe(bootstrap, group)
    assert sorted(described) == [(TOPIC, p) for p in range(PARTITIONS)]
    assert all(o.start_offset == 0 for (_, p), o in described.items() if leaders[p] == 0)
    assert _admin(bootstrap, lambda a: a.delete_groups([group])) == {group: None}


def test_the_share_state_rpcs_refuse_a_client(
    broker: tuple[BrokerProcess, dict[int, int]],
) -> None:
    """InitializeShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary are
    inter-broker requests (KIP-932): Kafka's `KafkaApis` answers CLUSTER_AUTHORIZATION_FAILED
    to a sender without CLUSTER_ACTION. A client (not another node of the set) gets that for
    every partition, and nothing changes."""
    from kio.schema.delete_share_group_state import v0 as delete_v0
    from kio.schema.initialize_share_group_state import v0 as init_v0
    from kio.schema.read_share_group_state_summary import v1 as summary_v1
    from kio.static.primitive import i32
    from kio.static.primitive import i64

    from client.connection import Connection

    b, _ = broker
    group = _group_on(1, "refused-")
    _consume(b.bootstrap, group, FIRST * PARTITIONS)
    before = _describe(b.bootstrap, group)
    topic_id = _admin(b.bootstrap, lambda a: a.list_topics())[TOPIC].topic_id

    async def send() -> list[Any]:
        answers = []
        for node in (0, 1):
            conn = await Connection.open("127.0.0.1", b.port + node, client_id="not-a-node")
            try:
                answers.append(
                    await conn.request(
                        init_v0.InitializeShareGroupStateRequest(
                            group_id=group,
                            topics=(
                                init_v0.request.InitializeStateData(
                                    topic_id=topic_id,
                                    partitions=tuple(
                                        init_v0.request.PartitionData(
                                            partition=i32(p),
                                            state_epoch=i32(0),
                                            start_offset=i64(0),
                                        )
                                        for p in range(PARTITIONS)
                                    ),
                                ),
                            ),
                        )
                    )
                )
                answers.append(
                    await conn.request(
                        delete_v0.DeleteShareGroupStateRequest(
                            group_id=group,
                            topics=(
                                delete_v0.request.DeleteStateData(
                                    topic_id=topic_id,
                                    partitions=tuple(
                                        delete_v0.request.PartitionData(partition=i32(p))
                                        for p in range(PARTITIONS)
                                    ),
                                ),
                            ),
                        )
                    )
                )
                answers.append(
                    await conn.request(
                        summary_v1.ReadShareGroupStateSummaryRequest(
                            group_id=group,
                            topics=(
                                summary_v1.request.ReadStateSummaryData(
                                    topic_id=topic_id,
                                    partitions=tuple(
                                        summary_v1.request.PartitionData(
                                            partition=i32(p), leader_epoch=i32(0)
                                        )
                                        for p in range(PARTITIONS)
                                    ),
                                ),
                            ),
                        )
                    )
                )
            finally:
                await conn.close()
        return answers

    for answer in asyncio.run(send()):
        codes = {p.error_code for t in answer.results for p in t.partitions}
        assert codes == {ErrorCode.cluster_authorization_failed}
    assert _describe(b.bootstrap, group) == before


def test_a_share_state_rpc_names_only_partitions_its_receiver_leads(
    broker: tuple[BrokerProcess, dict[int, int]],
) -> None:
    """Whoever sends them, each partition is checked before anything is applied: a topic id
    unknown here or a partition out of range is UNKNOWN_TOPIC_OR_PARTITION, a partition the
    other node leads NOT_COORDINATOR (Kafka's share coordinator for a key whose shard is
    elsewhere), a negative start offset INVALID_REQUEST; the partition it leads is reset."""
    import uuid

    from kio.schema.initialize_share_group_state import v0 as init_v0
    from kio.static.primitive import i32
    from kio.static.primitive import i64

    from client.connection import Connection

    b, _ = broker
    group = _group_on(0, "checked-")
    topic_id = _admin(b.bootstrap, lambda a: a.list_topics())[TOPIC].topic_id
    leaders = _leaders(b.bootstrap)
    mine = min(p for p in leaders if leaders[p] == 0)
    theirs = min(p for p in leaders if leaders[p] == 1)
    m = init_v0.request
    _admin(b.bootstrap, lambda a: a.alter_share_group_offsets(group, {(TOPIC, mine): 5}))

    def ask(tid: uuid.UUID, partitions: list[tuple[int, int]]) -> Any:
        async def send() -> Any:
            conn = await Connection.open("127.0.0.1", b.port, client_id="shoal-node-1")
            try:
                return await conn.request(
                    init_v0.InitializeShareGroupStateRequest(
                        group_id=group,
                        topics=(
                            m.InitializeStateData(
                                topic_id=tid,
                                partitions=tuple(
                                    m.PartitionData(
                                        partition=i32(p), state_epoch=i32(0), start_offset=i64(o)
                                    )
                                    for p, o in partitions
                                ),
                            ),
                        ),
                    )
                )
            finally:
                await conn.close()

        return asyncio.run(send())

    answer = ask(topic_id, [(theirs, 0), (PARTITIONS, 0), (-1, 0), (mine, -5), (mine, 0)])
    codes = [p.error_code for p in answer.results[0].partitions]
    assert codes == [ErrorCode.not_coordinator, ErrorCode.unknown_topic_or_partition,
                     ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_request,
                     ErrorCode.none]  # fmt: skip
    answer = ask(uuid.uuid4(), [(mine, 0)])
    assert [p.error_code for p in answer.results[0].partitions] == [
        ErrorCode.unknown_topic_or_partition
    ]
    described = _describe(b.bootstrap, group)
    assert described[(TOPIC, mine)].start_offset == 0
    assert described[(TOPIC, theirs)].start_offset == -1


def _topic_led_by(bootstrap: str, node: int, prefix: str) -> str:
    """A new one-partition topic that `node` leads (its leader follows its random topic id)."""
    for i in range(40):
        name = f"{prefix}{i}"
        create_topic(bootstrap, name, 1, timeout=30)
        md = admin(bootstrap).list_topics(name, 20).topics[name]
        if md.partitions[0].leader == node:
            return name
    raise AssertionError(f"no topic led by node {node}")


def _retried(bootstrap: str, call: Callable[[Admin], Awaitable[T]]) -> T:
    """`call`, again while the restarted node is not yet reachable or not yet serving (a
    retriable error or a refused connection); any other answer is returned or raised."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return _admin(bootstrap, call)
        except (ClientKafkaError, OSError) as e:
            fatal = isinstance(e, ClientKafkaError) and not e.retriable
            if fatal or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _listed(port: int, group: str) -> list[str]:
    """The states the group is listed with by ListGroups v5 to each node (an admin client asks
    every broker): one entry, from its coordinator, as in a Kafka cluster. confluent-kafka
    2.16 lists no share groups, so the requests are our own client's."""
    from kio.schema.list_groups import v5

    from client.connection import Connection

    async def ask(node: int) -> list[str]:
        conn = await Connection.open("127.0.0.1", port + node, client_id="lister")
        try:
            answer = await conn.request(v5.ListGroupsRequest(states_filter=(), types_filter=()))
        finally:
            await conn.close()
        assert answer.error_code == ErrorCode.none
        return [g.group_state for g in answer.groups if g.group_id == group]

    deadline = time.monotonic() + 60
    while True:
        try:
            return [s for node in (0, 1) for s in asyncio.run(ask(node))]
        except OSError:  # a node starting again
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def _classic_described(port: int, group: str) -> tuple[int, str | None]:
    """DescribeGroups v6 (the classic API) to the group's coordinator, node 1: Kafka 4 answers a
    share group's id "Group g is not a classic group.", an unknown one "Group g not found."
    (`GroupMetadataManager.classicGroup`, KIP-1043)."""
    from kio.schema.describe_groups import v6

    from client.connection import Connection

    async def ask() -> tuple[int, str | None]:
        conn = await Connection.open("127.0.0.1", port + 1, client_id="describer")
        try:
            answer = await conn.request(
                v6.DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)
            )
        finally:
            await conn.close()
        (g,) = answer.groups
        return g.error_code, g.error_message

    return asyncio.run(ask())


def _seen(bootstrap: str, port: int, group: str, topic: str) -> tuple[Any, ...]:
    """What the admin APIs answer for the group: its share-partition described (named, and
    with Topics null), its state by ShareGroupDescribe, and its ListGroups entries."""
    named = _retried(bootstrap, lambda a: a.describe_share_group_offsets(group, [(topic, 0)]))
    everything = _retried(bootstrap, lambda a: a.describe_share_group_offsets(group))
    described = _retried(bootstrap, lambda a: a.describe_share_groups([group]))[group]
    classic = _classic_described(port, group)
    return named, everything, described.state, _listed(port, group), classic


def test_a_restarted_coordinator_knows_a_group_whose_state_is_all_on_the_other_node(
    broker: tuple[BrokerProcess, dict[int, int]],
) -> None:
    """A share group coordinated by node 1 whose only share-partition node 0 leads: node 1 is
    killed -9 (the supervisor starts it again) and the admin APIs answer as before. In Kafka the
    coordinator knows every share group after a restart: it replays the ShareGroupMetadata
    records of `__consumer_offsets` (`GroupCoordinatorShard.replay` ->
    `GroupMetadataManager.replay`; a tombstone, written when DeleteGroups deletes the group,
    removes it). So DescribeShareGroupOffsets, ShareGroupDescribe, ListGroups (an Empty group,
    listed by its coordinator only) and DescribeGroups ("not a classic group") answer as
    before; AlterShareGroupOffsets and DeleteShareGroupOffsets apply; DeleteGroups deletes it:
    GROUP_ID_NOT_FOUND and not listed after, restart or not. Before, a node knew a group from
    the share-state snapshot files of every partition, read once: node 0 listed the group too,
    node 1 kept a deleted group, and a group whose snapshot node 0 had not yet written (it
    writes them each second) was GROUP_ID_NOT_FOUND after node 1's restart."""
    b, nodes = broker
    bootstrap = b.bootstrap
    group = _group_on(1, "restarted-")
    topic = _topic_led_by(bootstrap, 0, "led-by-0-")
    p = Producer({"bootstrap.servers": bootstrap, **QUIET})
    for i in range(15):
        p.produce(topic, value=b"%d" % i, partition=0)
        if i == 9:
            assert p.flush(30) == 0
            assert len(_consume(bootstrap, group, 10, topic)) == 10
    assert p.flush(30) == 0

    def restart() -> None:
        nodes.update(wait_for_nodes(b, 2, timeout=90, not_pids={_kill(nodes[1])}))

    before = _seen(bootstrap, b.port, group, topic)
    named, everything, state, listed, classic = before
    assert named[(topic, 0)].start_offset >= 10 and named[(topic, 0)].lag == 5  # share state
    # records lie in the partition's log too: offsets, not records, past the 10 consumed
    assert everything == named and state == "Empty" and listed == ["Empty"]
    assert classic == (ErrorCode.group_id_not_found, f"Group {group} is not a classic group.")
    restart()
    assert _seen(bootstrap, b.port, group, topic) == before

    _retried(bootstrap, lambda a: a.alter_share_group_offsets(group, {(topic, 0): 3}))
    named = _retried(bootstrap, lambda a: a.describe_share_group_offsets(group, [(topic, 0)]))
    assert named[(topic, 0)].start_offset == 3
    _retried(bootstrap, lambda a: a.delete_share_group_offsets(group, [topic]))
    named = _retried(bootstrap, lambda a: a.describe_share_group_offsets(group, [(topic, 0)]))
    assert named[(topic, 0)].start_offset == -1
    assert _retried(bootstrap, lambda a: a.delete_groups([group])) == {group: None}
    for restarted in (False, True):
        if restarted:
            restart()

        with pytest.raises(ClientKafkaError) as e:
            _retried(bootstrap, lambda a: a.describe_share_group_offsets(group))
        assert e.value.error_code == ErrorCode.group_id_not_found, restarted
        assert _listed(b.port, group) == [], restarted
        assert _classic_described(b.port, group)[1] == f"Group {group} not found.", restarted


def _kill(pid: int) -> int:
    os.kill(pid, signal.SIGKILL)
    return pid
