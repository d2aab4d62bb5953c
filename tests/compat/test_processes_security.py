"""ACLs and SCRAM users across the processes of `shoal serve --processes 2` (issue 33).

One SASL_PLAINTEXT listener (node i on port + i), the authorizer on, `super.users=User:admin`
and nothing open to anyone else. As in a Kafka cluster (KIP-590: a broker forwards CreateAcls,
DeleteAcls and AlterUserScramCredentials to the controller, `ForwardingManager`; every broker
then applies the change), node 0 alone writes the ACL and credential files, node 1 forwards
such a change to it and follows both files. librdkafka's AdminClient sends these requests to
the controller (`rdkafka_admin.c`: its admin requests target the controller by default), so the
changes "through node 1" are sent there by our own client (`client/connection.py`), as Java's
AdminClient may (it sends them to any broker). Producers, consumers and admin clients are
confluent-kafka's, unchanged. Every test fails with the supervisor of before: it refused the
authorizer with N > 1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import signal
import time
import uuid
import zlib
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AclBinding
from confluent_kafka.admin import AclOperation
from confluent_kafka.admin import AclPermissionType
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import ResourcePatternType
from confluent_kafka.admin import ResourceType
from confluent_kafka.admin import ScramCredentialInfo
from confluent_kafka.admin import ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion
from kio.schema.alter_user_scram_credentials import v0 as alter_users
from kio.schema.create_acls import v3 as create_acls
from kio.schema.delete_acls import v3 as delete_acls
from kio.schema.describe_acls import v3 as describe_acls
from kio.schema.describe_user_scram_credentials import v0 as describe_users
from kio.schema.errors import ErrorCode
from kio.schema.metadata import v12 as metadata
from kio.static.primitive import i8
from kio.static.primitive import i32

from cli.main import main as shoal
from client.connection import Connection
from client.security import AuthenticationError
from client.security import Security
from tests.brokers import BrokerProcess
from tests.brokers import configured_broker
from tests.brokers import free_ports
from tests.brokers import node_pids
from tests.brokers import wait_for_nodes
from tests.compat.support import QUIET
from tests.compat.support import error_code

pytestmark = [pytest.mark.compat, pytest.mark.slow]

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MECHANISM = "SCRAM-SHA-512"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
TOPIC_DENIED = int(ErrorCode.topic_authorization_failed)
# Kafka's enum values on the wire (AclOperation, AclPermissionType, PatternType, ResourceType).
WIRE_TOPIC, WIRE_LITERAL, WIRE_WRITE, WIRE_DESCRIBE = 2, 3, 4, 8
WIRE_ALLOW, WIRE_DENY, WIRE_ANY = 3, 2, 1
FOLLOW_S = 10.0  # the other node follows within about a second; a loaded machine gets more


@dataclass(frozen=True, slots=True)
class Nodes:
    broker: BrokerProcess
    port: int  # node i listens on port + i

    def bootstrap(self, node: int) -> str:
        return f"127.0.0.1:{self.port + node}"

    def config(self, user: str, node: int = 0, **extra: object) -> dict[str, object]:
        return {
            "bootstrap.servers": self.bootstrap(node),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": PASSWORDS.get(user, f"{user}-secret"),
            **QUIET,
            **extra,
        }

    def admin(self, node: int = 0) -> AdminClient:
        return AdminClient(self.config("admin", node))

    async def login(self, node: int, user: str, password: str) -> bool:
        """Whether `user` logs in on `node` (SCRAM-SHA-512, our client)."""
        security = Security("SASL_PLAINTEXT", MECHANISM, user, password)
        try:
            conn = await Connection.open("127.0.0.1", self.port + node, "test", security)
        except AuthenticationError:
            return False
        await conn.close()
        return True

    async def ask(self, node: int, body: Any) -> Any:
        """`body` sent to `node` itself as admin; its answer."""
        security = Security("SASL_PLAINTEXT", MECHANISM, "admin", PASSWORDS["admin"])
        conn = await Connection.open("127.0.0.1", self.port + node, "test", security)
        try:
            return await conn.request(body)
        finally:
            await conn.close()


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    data = tmp_path_factory.mktemp("processes-security") / "data"
    for user, password in PASSWORDS.items():
        code = shoal(["users", "add", user, "--password", password, "--mechanism", MECHANISM,
                      "--data-dir", str(data)])  # fmt: skip
        assert code == 0
    broker = configured_broker(data, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",  # --port: node i on port + i
        "sasl.enabled.mechanisms": MECHANISM,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
    })  # fmt: skip
    broker.port = free_ports(2)
    broker.extra += ["--processes", "2"]
    broker.start(timeout=90)
    wait_for_nodes(broker, 2, timeout=90)
    yield Nodes(broker, broker.port)
    broker.stop()


def _create_topic(nodes: Nodes, topic: str, partitions: int) -> None:
    client = nodes.admin()
    for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def _wait(condition: Callable[[], object], what: str, timeout: float = FOLLOW_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


async def _await(condition: Callable[[], Any], what: str, timeout: float = FOLLOW_S) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.1)


# -- ACLs -------------------------------------------------------------------------------------


def _acl(topic: str, principal: str, operation: int, permission: int) -> Any:
    return create_acls.request.AclCreation(
        resource_type=i8(WIRE_TOPIC), resource_name=topic, resource_pattern_type=i8(WIRE_LITERAL),
        principal=principal, host="*", operation=i8(operation), permission_type=i8(permission),
    )  # fmt: skip


def _filter(topic: str, operation: int, permission: int) -> Any:
    return delete_acls.request.DeleteAclsFilter(
        resource_type_filter=i8(WIRE_TOPIC), resource_name_filter=topic,
        pattern_type_filter=i8(WIRE_LITERAL), principal_filter=None, host_filter=None,
        operation=i8(operation), permission_type=i8(permission),
    )  # fmt: skip


async def _create_acls(nodes: Nodes, node: int, *creations: Any) -> None:
    answer = await nodes.ask(node, create_acls.CreateAclsRequest(creations=creations))
    assert [r.error_code for r in answer.results] == [ErrorCode.none] * len(creations)


async def _delete_acls(nodes: Nodes, node: int, *filters: Any) -> int:
    """The bindings deleted."""
    answer = await nodes.ask(node, delete_acls.DeleteAclsRequest(filters=filters))
    assert [r.error_code for r in answer.filter_results] == [ErrorCode.none] * len(filters)
    return sum(len(r.matching_acls) for r in answer.filter_results)


async def _listed(nodes: Nodes, node: int, topic: str | None) -> set[tuple[str, int, int]]:
    """(principal, operation, permission) of every binding on `topic` (None: every binding on
    anything, with the resource's name first), as `node` lists them."""
    answer = await nodes.ask(node, describe_acls.DescribeAclsRequest(
        resource_type_filter=i8(WIRE_ANY if topic is None else WIRE_TOPIC),
        resource_name_filter=topic,
        pattern_type_filter=i8(WIRE_ANY if topic is None else WIRE_LITERAL),
        principal_filter=None, host_filter=None,
        operation=i8(WIRE_ANY), permission_type=i8(WIRE_ANY),
    ))  # fmt: skip
    assert answer.error_code == ErrorCode.none
    return {
        (a.principal if topic else f"{r.resource_name} {a.principal}", int(a.operation),
         int(a.permission_type))
        for r in answer.resources
        for a in r.acls
    }  # fmt: skip


async def _followed(nodes: Nodes) -> bool:
    """Whether node 1 lists every binding node 0 does."""
    return await _listed(nodes, 1, None) == await _listed(nodes, 0, None)


class Writer:
    """One producer of alice's, kept (its connections cache authorization decisions), sending
    one record to each partition; `codes()` is each partition's delivery error (0: written)."""

    def __init__(self, nodes: Nodes, topic: str, partitions: int) -> None:
        self._producer = Producer(nodes.config("alice", **{"message.timeout.ms": 10000}))
        self._topic, self._partitions = topic, partitions

    def codes(self) -> list[int]:
        results: dict[int, int] = {}

        def done(err: KafkaError | None, msg: Any) -> None:
            results[msg.partition()] = 0 if err is None else int(err.code())

        for p in range(self._partitions):
            try:
                self._producer.produce(self._topic, b"v", partition=p, on_delivery=done)
            except KafkaException as e:  # librdkafka remembers a refusal until its next look
                results[p] = error_code(e)
        self._producer.flush(30)
        return [results.get(p, -1) for p in range(self._partitions)]


async def test_an_acl_created_or_deleted_through_either_node_takes_effect_on_both(
    nodes: Nodes,
) -> None:
    """Partition 0 and 1 of the topic are led by different nodes: a produce to both is
    authorized by each node's own ACLs. alice may DESCRIBE the topic throughout (Metadata
    answers her on any node), so every refusal below comes from a partition's leader."""
    topic = "ps-acl"
    _create_topic(nodes, topic, 2)
    await _create_acls(nodes, 0, _acl(topic, "User:alice", WIRE_DESCRIBE, WIRE_ALLOW))
    writer = Writer(nodes, topic, 2)
    _wait(lambda: writer.codes() == [TOPIC_DENIED] * 2, "alice refused before any WRITE")

    await _create_acls(nodes, 1, _acl(topic, "User:alice", WIRE_WRITE, WIRE_ALLOW))
    _wait(lambda: writer.codes() == [0, 0], "WRITE granted through node 1 on both leaders")
    both = {("User:alice", WIRE_DESCRIBE, WIRE_ALLOW), ("User:alice", WIRE_WRITE, WIRE_ALLOW)}
    assert await _listed(nodes, 1, topic) == both  # at once: node 1 followed before it answered
    assert await _listed(nodes, 0, topic) == both

    await _create_acls(nodes, 0, _acl(topic, "User:alice", WIRE_WRITE, WIRE_DENY))
    _wait(lambda: writer.codes() == [TOPIC_DENIED] * 2, "DENY made through node 0 on both")
    denied = both | {("User:alice", WIRE_WRITE, WIRE_DENY)}
    assert await _listed(nodes, 0, topic) == denied
    await _await(lambda: _same(nodes, topic, denied), "node 1 lists node 0's change")

    assert await _delete_acls(nodes, 1, _filter(topic, WIRE_WRITE, WIRE_DENY)) == 1
    _wait(lambda: writer.codes() == [0, 0], "DENY deleted through node 1, on both")
    assert await _delete_acls(nodes, 0, _filter(topic, WIRE_WRITE, WIRE_ALLOW)) == 1
    _wait(lambda: writer.codes() == [TOPIC_DENIED] * 2, "WRITE deleted through node 0, on both")
    for node in (0, 1):
        assert await _listed(nodes, node, topic) == {("User:alice", WIRE_DESCRIBE, WIRE_ALLOW)}


async def _same(nodes: Nodes, topic: str, expected: set[tuple[str, int, int]]) -> bool:
    return await _listed(nodes, 1, topic) == expected


# -- SCRAM users ------------------------------------------------------------------------------


def _upsertion(user: str) -> Any:
    salt = secrets.token_bytes(32)
    salted = hashlib.pbkdf2_hmac("sha512", f"{user}-secret".encode(), salt, 4096)
    return alter_users.request.ScramCredentialUpsertion(
        name=user, mechanism=i8(2), iterations=i32(4096), salt=salt, salted_password=salted
    )


async def _alter(nodes: Nodes, node: int, upsert: tuple[str, ...] = (),
                 delete: tuple[str, ...] = ()) -> list[int]:  # fmt: skip
    """Each user's error code, as `node` answered."""
    request = alter_users.AlterUserScramCredentialsRequest(
        deletions=tuple(
            alter_users.request.ScramCredentialDeletion(name=u, mechanism=i8(2)) for u in delete
        ),
        upsertions=tuple(_upsertion(u) for u in upsert),
    )
    answer = await nodes.ask(node, request)
    return [int(r.error_code) for r in answer.results]


async def _users(nodes: Nodes, node: int) -> set[str]:
    answer = await nodes.ask(node, describe_users.DescribeUserScramCredentialsRequest(users=None))
    assert answer.error_code == ErrorCode.none
    return {r.user for r in answer.results}


async def _logs_in(nodes: Nodes, user: str, nodes_: tuple[int, ...] = (0, 1)) -> bool:
    return all([await nodes.login(n, user, f"{user}-secret") for n in nodes_])


async def test_a_user_made_through_node_1_logs_in_on_both_and_none_made_at_once_is_lost(
    nodes: Nodes,
) -> None:
    """Before, each process wrote the one credentials file from its own memory: a user made
    through node 1 could not log in on node 0, and a user made through node 0 afterwards
    removed it from the file."""
    assert await _alter(nodes, 1, upsert=("carol",)) == [0]
    assert await _logs_in(nodes, "carol")  # at once on both: node 1 took the file it forwarded

    # Made concurrently through both nodes, one user per request: none lost.
    made = [f"user-{i}" for i in range(16)]
    codes = await asyncio.gather(*(_alter(nodes, i % 2, upsert=(u,)) for i, u in enumerate(made)))
    assert codes == [[0]] * len(made)
    everyone = {"admin", "alice", "carol", *made}
    assert await _users(nodes, 0) == everyone
    await _await(lambda: _described(nodes, 1, everyone), "node 1 lists every user")
    for user in made:
        await _await(lambda user=user: _logs_in(nodes, user), f"{user} logs in on both")
    stored = json.loads((nodes.broker.data_dir / "scram-credentials.json").read_text())["users"]
    assert set(stored) == everyone

    # confluent-kafka's AdminClient (it asks node 0); the user then logs in on node 1.
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin = nodes.admin(1)  # its futures fail if the client is destroyed first
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("dave", info, b"dave-secret")]
    )
    futures["dave"].result(30)
    await _await(lambda: _logs_in(nodes, "dave", (1,)), "dave logs in on node 1")
    consumer = Consumer(nodes.config("dave", 1, **{"group.id": "ps-dave"}))
    try:
        assert consumer.list_topics(timeout=30).brokers  # logged in and answered
    finally:
        consumer.close()

    # Deleted through either node: refused on both.
    assert await _alter(nodes, 0, delete=("carol",)) == [0]
    assert await _alter(nodes, 1, delete=("user-0",)) == [0]
    assert not await nodes.login(1, "user-0", "user-0-secret")  # at once where forwarded
    for user in ("carol", "user-0"):
        await _await(lambda user=user: _refused_on_both(nodes, user), f"{user} refused")


async def _described(nodes: Nodes, node: int, expected: set[str]) -> bool:
    return await _users(nodes, node) == expected


async def _refused_on_both(nodes: Nodes, user: str) -> bool:
    return not any([await nodes.login(n, user, f"{user}-secret") for n in (0, 1)])


# -- Transactions across the processes, with the authorizer on ------------------------------


def _txn_id(coordinator: int) -> str:
    return next(
        f"ps-txn-{i}" for i in range(100) if zlib.crc32(f"ps-txn-{i}".encode()) % 2 == coordinator
    )


def _read_committed(nodes: Nodes, topic: str, partitions: int, want: int) -> list[bytes]:
    c = Consumer(nodes.config("admin", **{"group.id": "ps-rc", "isolation.level":
                                          "read_committed"}))  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < want and time.monotonic() < deadline:
        seen += [m.value() for m in c.consume(1000, 0.5) if m.error() is None]
    ends = [
        c.get_watermark_offsets(TopicPartition(topic, p), 20)[1] for p in range(partitions)
    ]  # read_committed: the last stable offsets
    c.close()
    u = Consumer(nodes.config("admin", **{"group.id": "ps-ru"}))
    highs = [u.get_watermark_offsets(TopicPartition(topic, p), 20)[1] for p in range(partitions)]
    u.close()
    assert ends == highs  # every marker written: nothing left open on either leader
    return seen


async def test_transactions_across_both_processes_with_the_authorizer_on(nodes: Nodes) -> None:
    """Leaders verify with the coordinator (AddPartitionsToTxn verifyOnly) and the coordinator
    has the leaders write markers (WriteTxnMarkers): both need CLUSTER_ACTION, which the
    processes' own principal has (a super user, `broker.node_identity`); alice has only
    WRITE on the topic and on her transactional ids, as a Kafka producer needs."""
    topic, partitions = "ps-ledger", 4
    _create_topic(nodes, topic, partitions)
    grants = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.WRITE, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TRANSACTIONAL_ID, "ps-txn-", ResourcePatternType.PREFIXED,
                   "User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
    ]  # fmt: skip
    admin = nodes.admin()
    for future in admin.create_acls(grants).values():
        future.result(30)
    # Node 1 follows within a second: until then it refuses alice (a FATAL error to her
    # transactional producer, as a Kafka broker that has not applied the ACL yet would be).
    await _await(lambda: _followed(nodes), "node 1 follows node 0's ACLs")
    kept: list[bytes] = []
    for coordinator in (0, 1):
        p = Producer(nodes.config("alice", **{"transactional.id": _txn_id(coordinator),
                                              "linger.ms": 5}))  # fmt: skip
        p.init_transactions(60)
        for outcome in ("commit", "abort"):
            p.begin_transaction()
            values = [b"%d-%s-%d" % (coordinator, outcome.encode(), i) for i in range(8)]
            for i, value in enumerate(values):
                p.produce(topic, value, partition=i % partitions)
            if outcome == "commit":
                p.commit_transaction(60)
                kept += values
            else:
                p.abort_transaction(60)
    seen = _read_committed(nodes, topic, partitions, len(kept))
    assert sorted(seen) == sorted(kept)


async def test_a_topic_auto_created_through_node_1_is_made_by_node_0(nodes: Nodes) -> None:
    """Node 1 asks node 0 with CreateTopics (KIP-590, `AutoTopicCreationManager`) as the
    processes' own principal: admin's Metadata through node 1 finds the topic made."""
    request = metadata.MetadataRequest(
        topics=(metadata.request.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="ps-auto"),),
        allow_auto_topic_creation=True, include_topic_authorized_operations=False,
    )  # fmt: skip

    async def made() -> bool:
        answer = await nodes.ask(1, request)
        return bool(answer.topics[0].error_code == ErrorCode.none)

    await _await(made, "ps-auto made through node 1")
    assert "ps-auto" in nodes.admin().list_topics(timeout=30).topics


def test_the_processes_own_user_is_not_a_user_anyone_can_log_in_as(nodes: Nodes) -> None:
    """The processes log in to each other with a secret of this run, not a stored password."""
    assert not asyncio.run(nodes.login(0, "__shoal_node", ""))
    assert not asyncio.run(nodes.login(1, "__shoal_node", "__shoal_node-secret"))


async def test_a_change_forwarded_while_node_0_restarts_waits_for_it(nodes: Nodes) -> None:
    """Node 0 killed -9 (the supervisor starts it again within a second or so): a user made
    through node 1 meanwhile is forwarded once node 0 listens again, as Kafka's
    `NodeToControllerChannelManager` keeps a forwarded request queued while the controller is
    away (REQUEST_TIMED_OUT only past the deadline), and logs in on both."""
    pids = node_pids(nodes.broker)
    os.kill(pids[0], signal.SIGKILL)
    assert await _alter(nodes, 1, upsert=("erin",)) == [0]
    wait_for_nodes(nodes.broker, 2, timeout=90, not_pids={pids[0]})
    assert await _logs_in(nodes, "erin")
