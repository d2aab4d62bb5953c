"""ACLs end to end: real SASL users (SCRAM-SHA-512) meet the authorizer, through confluent-kafka.

One `shoal serve` process with the authorizer on, `super.users=User:admin` and no
`allow.everyone.if.no.acl.found`: a resource without an ACL is closed to everyone but admin.
admin, alice and bob are made with `shoal users add` before the broker starts. Each test grants
what it needs as admin, on names no other test uses, then shows one user allowed and another
refused the same call. Run without the authorizer, every refusal here would be a success.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer
from confluent_kafka import KafkaError
from confluent_kafka import KafkaException
from confluent_kafka import Producer
from confluent_kafka import ShareConsumer
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AclBinding
from confluent_kafka.admin import AclBindingFilter
from confluent_kafka.admin import AclOperation
from confluent_kafka.admin import AclPermissionType
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import AlterConfigOpType
from confluent_kafka.admin import ConfigEntry
from confluent_kafka.admin import ConfigResource
from confluent_kafka.admin import NewTopic
from confluent_kafka.admin import ResourcePatternType
from confluent_kafka.admin import ResourceType
from confluent_kafka.admin import ScramCredentialInfo
from confluent_kafka.admin import ScramMechanism
from confluent_kafka.admin import UserScramCredentialUpsertion
from kio.schema.errors import ErrorCode

import client
from bench.broker import free_port
from cli.main import main as shoal
from client.connection import Connection
from client.security import Security
from client.share_acks import AcknowledgeType
from client.share_session import share_acknowledge_request
from client.users import describe_users
from tests.brokers import BrokerProcess
from tests.compat.support import QUIET
from tests.compat.support import SHORT_SESSION_CONFIG
from tests.compat.support import error_code
from tests.compat.support import start_broker

pytestmark = [pytest.mark.compat, pytest.mark.slow]

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
MECHANISM = "SCRAM-SHA-512"
TOPIC_DENIED = int(ErrorCode.topic_authorization_failed)
GROUP_DENIED = int(ErrorCode.group_authorization_failed)
CLUSTER_DENIED = int(ErrorCode.cluster_authorization_failed)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


@dataclass(frozen=True, slots=True)
class Secured:
    broker: BrokerProcess
    port: int  # the SASL_PLAINTEXT listener

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def config(self, user: str, **extra: object) -> dict[str, object]:
        """librdkafka settings for `user` on the SASL listener."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            **QUIET,
            **extra,
        }

    def admin(self, user: str) -> AdminClient:
        return AdminClient(self.config(user))

    def security(self, user: str) -> Security:
        """The same credentials for our own client (`client/`)."""
        return Security("SASL_PLAINTEXT", MECHANISM, user, PASSWORDS[user])

    def grant(
        self,
        user: str,
        rtype: ResourceType,
        name: str,
        *ops: AclOperation,
        perm: AclPermissionType = ALLOW,
        pattern: ResourcePatternType = LITERAL,
    ) -> None:
        """As admin (a super user, allowed to alter ACLs without any ACL)."""
        bindings = [AclBinding(rtype, name, pattern, f"User:{user}", "*", op, perm) for op in ops]
        client = self.admin("admin")
        for future in client.create_acls(bindings).values():
            future.result(30)

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        client = self.admin("admin")
        for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result(30)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    data_dir = tmp_path_factory.mktemp("sasl-acls") / "data"
    for user, password in PASSWORDS.items():
        code = shoal(
            ["users", "add", user, "--password", password, "--mechanism", MECHANISM,
             "--data-dir", str(data_dir)]
        )  # fmt: skip
        assert code == 0
    port = free_port()
    config: dict[str, object] = {
        # The launcher's --port moves the first listener (PLAINTEXT, User:ANONYMOUS, unused).
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": MECHANISM,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "group.share.auto.offset.reset": "earliest",
        **SHORT_SESSION_CONFIG,
    }
    broker = start_broker(data_dir, config)
    yield Secured(broker, port)
    broker.stop()


def _failure(future: object) -> int:
    """0 if an admin future succeeds, else the Kafka error code it failed with."""
    try:
        future.result(30)  # type: ignore[attr-defined]
    except KafkaException as e:
        return error_code(e)
    return 0


def _produce(secured: Secured, user: str, topic: str, value: bytes = b"v") -> int:
    """One record as `user`; its delivery's error code (0: delivered)."""
    results: list[int] = []

    def done(err: KafkaError | None, _msg: object) -> None:
        results.append(0 if err is None else int(err.code()))

    producer = Producer(secured.config(user, **{"message.timeout.ms": 10000}))
    producer.produce(topic, value, on_delivery=done)
    producer.flush(30)
    return results[0] if results else -1


# -- Producer, Consumer, ShareConsumer --------------------------------------------------------


def test_producer_needs_write_on_the_topic(secured: Secured) -> None:
    secured.create_topic("sa-produce")
    secured.grant("alice", TOPIC, "sa-produce", AclOperation.WRITE)
    assert _produce(secured, "alice", "sa-produce") == 0
    assert _produce(secured, "bob", "sa-produce") == TOPIC_DENIED


def _assign_and_read(
    secured: Secured, user: str, topic: str, seconds: float
) -> tuple[int, set[int]]:
    """(records read, error codes seen) by a Consumer assigned partition 0 from offset 0.

    librdkafka still looks for the group's coordinator (DESCRIBE on the group, which no one
    here is granted): GROUP_AUTHORIZATION_FAILED is reported besides and does not stop it."""
    consumer = Consumer(
        secured.config(user, **{"group.id": f"assign-{user}", "enable.auto.commit": False})
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    read, errors = 0, set()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not read and TOPIC_DENIED not in errors:
            for m in consumer.consume(100, timeout=0.5):
                err = m.error()
                if err is None:
                    read += 1
                elif err.code() != KafkaError._PARTITION_EOF:
                    errors.add(int(err.code()))
    finally:
        consumer.close()
    return read, errors


def test_consumer_assign_needs_read_on_the_topic(secured: Secured) -> None:
    secured.create_topic("sa-fetch")
    assert _produce(secured, "admin", "sa-fetch") == 0
    secured.grant("alice", TOPIC, "sa-fetch", AclOperation.READ)
    # bob may see the topic (DESCRIBE), so his Fetch is what gets refused.
    secured.grant("bob", TOPIC, "sa-fetch", AclOperation.DESCRIBE)
    read, errors = _assign_and_read(secured, "alice", "sa-fetch", 30)
    assert (read, TOPIC_DENIED in errors) == (1, False)
    read, errors = _assign_and_read(secured, "bob", "sa-fetch", 30)
    assert (read, TOPIC_DENIED in errors) == (0, True), errors


def _share_consume(
    secured: Secured, user: str, group: str, topic: str, seconds: float
) -> tuple[int, set[int]]:
    """(records received, error codes seen: on records, raised by poll or given to error_cb)
    by a ShareConsumer polling for `seconds` or until it has records."""
    errors: set[int] = set()
    consumer = ShareConsumer(
        secured.config(user, **{"group.id": group, "error_cb": lambda e: errors.add(e.code())})
    )
    consumer.subscribe([topic])
    received = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not received:
            try:
                messages = consumer.poll(0.5)
            except KafkaException as e:
                errors.add(error_code(e))
                continue
            for m in messages:
                err = m.error()
                if err is None:
                    received += 1
                elif err.code() != KafkaError._PARTITION_EOF:
                    errors.add(int(err.code()))
    finally:
        consumer.close()
    return received, errors


def test_share_consumer_needs_read_on_group_and_topic(secured: Secured) -> None:
    secured.create_topic("sa-share")
    assert _produce(secured, "admin", "sa-share") == 0
    for user in ("alice", "bob"):
        secured.grant(user, TOPIC, "sa-share", AclOperation.READ)
    secured.grant("alice", GROUP, "sa-workers", AclOperation.READ)
    # bob may read the topic but not the group: he joins nothing and receives nothing.
    refused, refusal_errors = _share_consume(secured, "bob", "sa-workers", "sa-share", 10)
    allowed, allowed_errors = _share_consume(secured, "alice", "sa-workers", "sa-share", 30)
    assert (refused, allowed) == (0, 1)
    assert GROUP_DENIED in refusal_errors
    assert allowed_errors == set()


# -- AdminClient -------------------------------------------------------------------------------


def test_create_and_delete_topics_need_create_and_delete(secured: Secured) -> None:
    secured.grant("alice", TOPIC, "sa-made-", AclOperation.CREATE, AclOperation.DELETE,
                  pattern=PREFIXED)  # fmt: skip
    alice, bob = secured.admin("alice"), secured.admin("bob")
    created = _failure(alice.create_topics([NewTopic("sa-made-1", 1, 1)])["sa-made-1"])
    bob_created = _failure(bob.create_topics([NewTopic("sa-made-2", 1, 1)])["sa-made-2"])
    bob_deleted = _failure(bob.delete_topics(["sa-made-1"])["sa-made-1"])
    deleted = _failure(alice.delete_topics(["sa-made-1"])["sa-made-1"])
    assert (created, deleted) == (0, 0)
    assert (bob_created, bob_deleted) == (TOPIC_DENIED, TOPIC_DENIED)


def _set_retention(client: AdminClient, topic: str) -> int:
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    return _failure(client.incremental_alter_configs([resource])[resource])


def _describe(client: AdminClient, topic: str) -> int:
    resource = ConfigResource("topic", topic)
    return _failure(client.describe_configs([resource])[resource])


def test_describe_and_alter_configs_need_describe_configs_and_alter_configs(
    secured: Secured,
) -> None:
    secured.create_topic("sa-configs")
    secured.grant("alice", TOPIC, "sa-configs", AclOperation.DESCRIBE_CONFIGS,
                  AclOperation.ALTER_CONFIGS)  # fmt: skip
    alice, bob = secured.admin("alice"), secured.admin("bob")
    assert (_describe(alice, "sa-configs"), _set_retention(alice, "sa-configs")) == (0, 0)
    assert (_describe(bob, "sa-configs"), _set_retention(bob, "sa-configs")) == (
        TOPIC_DENIED, TOPIC_DENIED,
    )  # fmt: skip


def test_acl_apis_need_alter_and_describe_on_the_cluster(secured: Secured) -> None:
    secured.grant("alice", CLUSTER, "kafka-cluster", AclOperation.ALTER, AclOperation.DESCRIBE)
    binding = AclBinding(TOPIC, "sa-acl", LITERAL, "User:carol", "*", AclOperation.READ, ALLOW)
    mine = AclBindingFilter(TOPIC, "sa-acl", LITERAL, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)  # fmt: skip
    alice, bob = secured.admin("alice"), secured.admin("bob")
    assert _failure(bob.create_acls([binding])[binding]) == CLUSTER_DENIED
    assert _failure(alice.create_acls([binding])[binding]) == 0
    assert [b.principal for b in alice.describe_acls(mine).result(30)] == ["User:carol"]
    # librdkafka drops DescribeAcls' top-level error: bob's refusal reaches him as no ACLs.
    assert bob.describe_acls(mine).result(30) == []
    assert _failure(bob.delete_acls([mine])[mine]) == CLUSTER_DENIED
    assert [b.principal for b in alice.delete_acls([mine])[mine].result(30)] == ["User:carol"]


async def _describe_users(secured: Secured, user: str, names: list[str]) -> object:
    """DescribeUserScramCredentials through our client: librdkafka 2.16 aborts the process
    (munmap_chunk) on any error in that answer, so the refusal is read here."""
    async with client.Admin(secured.bootstrap, security=secured.security(user)) as admin:
        try:
            return await describe_users(admin.cluster, names)
        except client.KafkaError as e:
            return e.error_code


async def test_scram_user_apis_need_alter_and_describe_on_the_cluster(secured: Secured) -> None:
    secured.grant("alice", CLUSTER, "kafka-cluster", AclOperation.ALTER, AclOperation.DESCRIBE)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion("dave", info, b"dave-secret")
    alice, bob = secured.admin("alice"), secured.admin("bob")
    assert _failure(bob.alter_user_scram_credentials([upsert])["dave"]) == CLUSTER_DENIED
    assert _failure(alice.alter_user_scram_credentials([upsert])["dave"]) == 0
    described = alice.describe_user_scram_credentials(["dave"])["dave"].result(30)
    assert [i.mechanism for i in described.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_512]
    assert await _describe_users(secured, "bob", ["dave"]) == CLUSTER_DENIED
    assert await _describe_users(secured, "alice", ["dave"]) == {"dave": {"SCRAM-SHA-512": 4096}}


# -- Kafka's rules: DENY wins, PREFIXED, super users, Metadata ---------------------------------


def test_a_deny_beats_an_allow(secured: Secured) -> None:
    secured.create_topic("sa-pay-in")
    for user in ("alice", "bob"):
        secured.grant(user, TOPIC, "sa-pay-in", AclOperation.WRITE)
    secured.grant("bob", TOPIC, "sa-pay", AclOperation.WRITE, perm=DENY, pattern=PREFIXED)
    assert _produce(secured, "alice", "sa-pay-in") == 0
    assert _produce(secured, "bob", "sa-pay-in") == TOPIC_DENIED


def test_a_prefixed_allow_covers_every_topic_with_the_prefix(secured: Secured) -> None:
    for topic in ("sa-logs-a", "sa-logs-b", "sa-other"):
        secured.create_topic(topic)
    secured.grant("alice", TOPIC, "sa-logs-", AclOperation.WRITE, pattern=PREFIXED)
    codes = [_produce(secured, "alice", t) for t in ("sa-logs-a", "sa-logs-b", "sa-other")]
    assert codes == [0, 0, TOPIC_DENIED]


def test_the_super_user_may_do_everything_without_acls(secured: Secured) -> None:
    admin, bob = secured.admin("admin"), secured.admin("bob")
    topic = "sa-super"
    assert _failure(admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == 0
    assert _produce(secured, "admin", topic) == 0
    assert _assign_and_read(secured, "admin", topic, 30) == (1, set())  # the group too
    assert (_describe(admin, topic), _set_retention(admin, topic)) == (0, 0)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    assert _failure(admin.describe_acls(everything)) == 0
    assert _failure(admin.describe_user_scram_credentials(["bob"])["bob"]) == 0
    # The same calls by a user without ACLs on them are refused.
    assert _produce(secured, "bob", topic) == TOPIC_DENIED
    assert _describe(bob, topic) == TOPIC_DENIED
    assert _failure(bob.delete_topics([topic])[topic]) == TOPIC_DENIED
    assert _failure(admin.delete_topics([topic])[topic]) == 0


def test_metadata_lists_only_the_topics_a_user_may_describe(secured: Secured) -> None:
    for topic in ("sa-seen", "sa-hidden"):
        secured.create_topic(topic)
    secured.grant("alice", TOPIC, "sa-seen", AclOperation.DESCRIBE)
    seen = set(secured.admin("alice").list_topics(timeout=30).topics)
    assert "sa-seen" in seen
    assert "sa-hidden" not in seen
    assert {"sa-seen", "sa-hidden"} <= set(secured.admin("admin").list_topics(timeout=30).topics)


# -- A share session belongs to its principal --------------------------------------------------


async def test_bob_cannot_acknowledge_in_alices_share_session(secured: Secured) -> None:
    """bob may READ the group and the topic, and knows alice's member id and session epoch:
    his ShareAcknowledge in her session is refused, and her records stay hers to acknowledge."""
    secured.create_topic("sa-owned")
    for user in ("alice", "bob"):
        secured.grant(user, TOPIC, "sa-owned", AclOperation.READ)
        secured.grant(user, GROUP, "sa-owners", AclOperation.READ)
    assert _produce(secured, "admin", "sa-owned") == 0
    alice = client.ShareConsumer(
        secured.bootstrap, "sa-owners", acknowledgement_mode="explicit",
        security=secured.security("alice"),
    )  # fmt: skip
    async with alice:
        alice.subscribe(["sa-owned"])
        records: list[client.ConsumerRecord] = []
        deadline = time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records = await alice.poll(1.0)
        assert [r.offset for r in records] == [0]
        # What bob would need to pose as alice: her member id, the topic id, the epoch her
        # session expects next (the client keeps the last two to itself).
        topic_id = alice._topic_ids["sa-owned"]
        (session,) = alice._sessions.values()
        bob = await Connection.open("127.0.0.1", secured.port, security=secured.security("bob"))
        try:
            request = share_acknowledge_request(
                1, "sa-owners", alice.member_id, session.epoch,
                {(topic_id, 0): {0: AcknowledgeType.ACCEPT}},
            )  # fmt: skip
            answer = await bob.request(request)
        finally:
            await bob.close()
        assert answer.error_code == ErrorCode.group_authorization_failed
        alice.acknowledge(records[0], AcknowledgeType.ACCEPT)
        assert await alice.commit_sync() == {("sa-owned", 0): ErrorCode.none}
