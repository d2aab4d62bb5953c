"""Each handler's ACL checks, allowed and denied, with named principals.

Authentication is not part of this branch, so these tests build a RequestContext with the
principal they need and call the registered handlers directly, on a real (not started) broker
with the authorizer on: the same services and handlers a connection would use.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.alter_share_group_offsets import v0 as alter_offsets
from kio.schema.alter_user_scram_credentials import v0 as alter_scram
from kio.schema.create_acls import v3 as create_acls
from kio.schema.create_partitions import v3 as create_partitions
from kio.schema.create_topics import v7 as create_topics
from kio.schema.delete_groups import v2 as delete_groups
from kio.schema.delete_records import v2 as delete_records
from kio.schema.delete_share_group_offsets import v0 as delete_offsets
from kio.schema.delete_topics import v6 as delete_topics
from kio.schema.describe_acls import v3 as describe_acls
from kio.schema.describe_cluster import v1 as describe_cluster
from kio.schema.describe_configs import v4 as describe_configs
from kio.schema.describe_log_dirs import v1 as describe_log_dirs_v1
from kio.schema.describe_log_dirs import v4 as describe_log_dirs
from kio.schema.describe_share_group_offsets import v1 as describe_offsets
from kio.schema.describe_user_scram_credentials import v0 as describe_scram
from kio.schema.errors import ErrorCode
from kio.schema.fetch import v12 as fetch
from kio.schema.find_coordinator import v4 as find_coordinator
from kio.schema.incremental_alter_configs import v1 as alter_configs
from kio.schema.init_producer_id import v4 as init_producer_id
from kio.schema.list_groups import v5 as list_groups
from kio.schema.list_offsets import v8 as list_offsets
from kio.schema.metadata import v12 as metadata
from kio.schema.offset_fetch import v9 as offset_fetch
from kio.schema.produce import v10 as produce
from kio.schema.share_acknowledge import v1 as share_ack
from kio.schema.share_fetch import v1 as share_fetch
from kio.schema.share_group_describe import v1 as share_describe
from kio.schema.share_group_heartbeat import v1 as heartbeat
from kio.schema.types import BrokerId
from kio.schema.types import GroupId
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.static.primitive import Records
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64

from broker.acl_cache import AclCache
from broker.authorized_operations import TOPIC_OPERATIONS
from broker.context import BrokerServices
from broker.context import RequestContext
from broker.server import Server
from protocol.acl import AccessControlEntry
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.acl import AclOperation as Op
from protocol.acl import AclPermissionType as Perm
from protocol.acl import PatternType
from protocol.acl import ResourcePattern
from protocol.acl import ResourceType as RT
from protocol.messages import EncodedResponse
from protocol.messages import RequestHeader
from protocol.messages import decode_response
from protocol.messages import encode_response
from protocol.record_batch import build_batch
from tests.brokers import make_server

ADMIN, ALICE, BOB = "User:admin", "User:alice", "User:bob"
TOPIC, GROUP = "orders", "workers"
NO_WAIT = i32Timedelta.parse(__import__("datetime").timedelta(0))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = make_server(
        tmp_path / "data",
        **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
        **{"super.users": ADMIN},
    )
    srv.services.logs.create_topic(TOPIC, 1, {})
    srv.services.logs.create_topic("payments", 1, {})
    yield srv
    srv.services.logs.close()


def acl(
    rtype: RT,
    name: str,
    op: Op,
    principal: str = ALICE,
    perm: Perm = Perm.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm)
    )


async def grant(services: BrokerServices, *bindings: AclBinding) -> None:
    assert services.acls is not None
    assert await services.acls.create(bindings) == [None] * len(bindings)


async def call(services: BrokerServices, principal: str, request: Any) -> Any:
    """Dispatch `request` as `principal` (from 10.0.0.1) through the registered handler."""
    key, version = int(request.__api_key__), int(request.__version__)
    h = services.registry.get(key)
    assert h is not None
    header = RequestHeader(key, version, 1, "test")
    ctx = RequestContext(services, header, "10.0.0.1:5000", principal, AclCache())
    answer = await h.dispatch(ctx, request)
    if isinstance(answer, EncodedResponse):  # a hot API's own bytes: read back by kio
        _, answer = decode_response(key, version, encode_response(answer, 1, version))
    return answer


def _produce(topic: str) -> produce.ProduceRequest:
    batch = build_batch([(b"k", b"v")], timestamp_ms=1)
    return produce.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(__import__("datetime").timedelta(seconds=1)),
        topic_data=(
            produce.request.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce.request.PartitionProduceData(index=i32(0), records=Records(batch)),
                ),
            ),
        ),
    )


def _produce_code(response: produce.ProduceResponse) -> ErrorCode:
    return response.responses[0].partition_responses[0].error_code


# --- Produce: WRITE on the topic


async def test_produce_needs_write_on_the_topic(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.WRITE))
    assert _produce_code(await call(s, ALICE, _produce(TOPIC))) == ErrorCode.none
    assert _produce_code(await call(s, BOB, _produce(TOPIC))) == (
        ErrorCode.topic_authorization_failed
    )
    assert _produce_code(await call(s, ALICE, _produce("payments"))) == (
        ErrorCode.topic_authorization_failed
    )
    assert s.logs.log(TOPIC, 0).log_end_offset == 1  # type: ignore[union-attr]


async def test_a_deny_beats_an_allow_and_a_prefix_covers_its_topics(server: Server) -> None:
    s = server.services
    await grant(
        s,
        acl(RT.TOPIC, "ord", Op.WRITE, pattern=PatternType.PREFIXED),
        acl(RT.TOPIC, "pay", Op.ALL, pattern=PatternType.PREFIXED),
    )
    assert _produce_code(await call(s, ALICE, _produce(TOPIC))) == ErrorCode.none
    assert _produce_code(await call(s, ALICE, _produce("payments"))) == ErrorCode.none
    await grant(s, acl(RT.TOPIC, "*", Op.WRITE, principal="User:*", perm=Perm.DENY))
    assert _produce_code(await call(s, ALICE, _produce(TOPIC))) == (
        ErrorCode.topic_authorization_failed
    )
    assert _produce_code(await call(s, ALICE, _produce("payments"))) == (
        ErrorCode.topic_authorization_failed
    )


async def test_a_super_user_needs_no_acl(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, "*", Op.ALL, principal="User:*", perm=Perm.DENY))
    assert _produce_code(await call(s, ADMIN, _produce(TOPIC))) == ErrorCode.none
    assert _produce_code(await call(s, ALICE, _produce(TOPIC))) == (
        ErrorCode.topic_authorization_failed
    )


async def test_a_host_acl_applies_to_that_host_only(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.WRITE, host="10.0.0.2"))
    assert _produce_code(await call(s, ALICE, _produce(TOPIC))) == (
        ErrorCode.topic_authorization_failed
    )
    await grant(s, acl(RT.TOPIC, TOPIC, Op.WRITE, host="10.0.0.1"))
    assert _produce_code(await call(s, ALICE, _produce(TOPIC))) == ErrorCode.none


# --- Fetch and ListOffsets: READ / DESCRIBE on the topic


def _fetch(topic: str) -> fetch.FetchRequest:
    return fetch.FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=NO_WAIT,
        min_bytes=i32(0),
        max_bytes=i32(1 << 20),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            fetch.request.FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    fetch.request.FetchPartition(
                        partition=i32(0),
                        fetch_offset=i64(0),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(1 << 20),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


async def test_fetch_needs_read_and_describe_is_not_enough(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.DESCRIBE), acl(RT.TOPIC, TOPIC, Op.READ, BOB))
    denied = await call(s, ALICE, _fetch(TOPIC))
    assert denied.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    allowed = await call(s, BOB, _fetch(TOPIC))
    assert allowed.responses[0].partitions[0].error_code == ErrorCode.none


def _list_offsets(topic: str) -> list_offsets.ListOffsetsRequest:
    r = list_offsets.request
    return list_offsets.ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(0),
        topics=(
            r.ListOffsetsTopic(
                name=TopicName(topic),
                partitions=(r.ListOffsetsPartition(partition_index=i32(0), timestamp=i64(-1)),),
            ),
        ),
    )


async def test_list_offsets_needs_describe_which_read_implies(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.READ))
    ok = await call(s, ALICE, _list_offsets(TOPIC))
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    refused = await call(s, BOB, _list_offsets(TOPIC))
    assert refused.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed


# --- Metadata: DESCRIBE (hidden when listing all, refused when named), CREATE to auto-create


async def test_metadata_hides_or_refuses_what_the_principal_may_not_describe(
    server: Server,
) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.WRITE))  # WRITE implies DESCRIBE
    everything = await call(
        s, ALICE, metadata.MetadataRequest(topics=None, include_topic_authorized_operations=True)
    )
    assert [t.name for t in everything.topics] == [TOPIC]
    ops = everything.topics[0].topic_authorized_operations
    assert ops == (1 << Op.WRITE) | (1 << Op.DESCRIBE) and ops & TOPIC_OPERATIONS == ops
    named = await call(
        s,
        ALICE,
        metadata.MetadataRequest(
            topics=(
                metadata.request.MetadataRequestTopic(topic_id=None, name=TopicName("payments")),
            ),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    assert named.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert named.topics[0].partitions == ()
    info = s.logs.topic("payments")
    assert info is not None
    by_id = await call(
        s,
        ALICE,
        metadata.MetadataRequest(
            topics=(metadata.request.MetadataRequestTopic(topic_id=info.topic_id, name=None),),
            include_topic_authorized_operations=False,
        ),
    )
    assert by_id.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert by_id.topics[0].name is None  # the name stays hidden


async def test_auto_creation_needs_create(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, "new", Op.DESCRIBE, pattern=PatternType.PREFIXED))

    def wanted(name: str) -> metadata.MetadataRequest:
        return metadata.MetadataRequest(
            topics=(metadata.request.MetadataRequestTopic(topic_id=None, name=TopicName(name)),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )

    refused = await call(s, ALICE, wanted("new-a"))
    assert refused.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert s.logs.topic("new-a") is None
    await grant(s, acl(RT.TOPIC, "new", Op.CREATE, pattern=PatternType.PREFIXED))
    created = await call(s, ALICE, wanted("new-a"))
    assert created.topics[0].error_code == ErrorCode.none and s.logs.topic("new-a") is not None


# --- CreateTopics, DeleteTopics, configs


def _create(name: str) -> create_topics.CreateTopicsRequest:
    r = create_topics.request
    return create_topics.CreateTopicsRequest(
        topics=(
            r.CreatableTopic(
                name=TopicName(name),
                num_partitions=i32(1),
                replication_factor=i16(1),
                assignments=(),
                configs=(),
            ),
        ),
        timeout=i32Timedelta.parse(__import__("datetime").timedelta(seconds=5)),
        validate_only=False,
    )


async def test_create_topics_needs_create_on_the_cluster_or_the_topic(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, "a", Op.CREATE), acl(RT.CLUSTER, "kafka-cluster", Op.CREATE, BOB))
    assert (await call(s, ALICE, _create("a"))).topics[0].error_code == ErrorCode.none
    assert (await call(s, ALICE, _create("b"))).topics[0].error_code == (
        ErrorCode.topic_authorization_failed
    )
    assert (await call(s, BOB, _create("b"))).topics[0].error_code == ErrorCode.none


async def test_delete_topics_needs_delete(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.DESCRIBE))

    def delete(name: str) -> delete_topics.DeleteTopicsRequest:
        return delete_topics.DeleteTopicsRequest(
            topics=(
                delete_topics.request.DeleteTopicState(
                    name=TopicName(name), topic_id=uuid.UUID(int=0)
                ),
            ),
            timeout=NO_WAIT,
        )

    refused = await call(s, ALICE, delete(TOPIC))
    assert refused.responses[0].error_code == ErrorCode.topic_authorization_failed
    assert s.logs.topic(TOPIC) is not None
    await grant(s, acl(RT.TOPIC, TOPIC, Op.DELETE))
    assert (await call(s, ALICE, delete(TOPIC))).responses[0].error_code == ErrorCode.none
    assert s.logs.topic(TOPIC) is None


async def test_delete_records_needs_delete_on_the_topic(server: Server) -> None:
    s = server.services
    plog = s.logs.log(TOPIC, 0)
    assert plog is not None
    plog.append(build_batch([(b"k", b"v")] * 5, timestamp_ms=1), now_ms=1)
    await grant(s, acl(RT.TOPIC, TOPIC, Op.READ))  # READ and DESCRIBE are not enough
    r = delete_records.request
    request = delete_records.DeleteRecordsRequest(
        topics=(
            r.DeleteRecordsTopic(
                name=TopicName(TOPIC),
                partitions=(r.DeleteRecordsPartition(partition_index=i32(0), offset=i64(3)),),
            ),
        ),
        timeout=NO_WAIT,
    )
    refused = (await call(s, ALICE, request)).topics[0].partitions[0]
    assert refused.error_code == ErrorCode.topic_authorization_failed
    assert plog.log_start_offset == 0
    await grant(s, acl(RT.TOPIC, TOPIC, Op.DELETE))
    allowed = (await call(s, ALICE, request)).topics[0].partitions[0]
    assert (allowed.error_code, allowed.low_watermark, plog.log_start_offset) == (0, 3, 3)


async def test_scram_credential_apis_need_describe_and_alter_on_the_cluster(
    server: Server,
) -> None:
    s = server.services
    delete = alter_scram.request.ScramCredentialDeletion(name="carol", mechanism=i8(2))
    alter = alter_scram.AlterUserScramCredentialsRequest(deletions=(delete,), upsertions=())
    describe = describe_scram.DescribeUserScramCredentialsRequest(users=None)
    assert (await call(s, ALICE, describe)).error_code == ErrorCode.cluster_authorization_failed
    denied = (await call(s, ALICE, alter)).results[0]
    assert denied.error_code == ErrorCode.cluster_authorization_failed
    await grant(s, acl(RT.CLUSTER, "kafka-cluster", Op.ALTER))  # implies DESCRIBE
    assert (await call(s, ALICE, describe)).error_code == ErrorCode.none
    allowed = (await call(s, ALICE, alter)).results[0]
    assert allowed.error_code == ErrorCode.resource_not_found  # no such user: checked, not denied


async def test_configs_need_describe_configs_and_alter_configs(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    d = describe_configs.request

    def describe(rtype: int, name: str) -> describe_configs.DescribeConfigsRequest:
        return describe_configs.DescribeConfigsRequest(
            resources=(
                d.DescribeConfigsResource(
                    resource_type=i8(rtype), resource_name=name, configuration_keys=None
                ),
            ),
            include_synonyms=False,
            include_documentation=False,
        )

    assert (await call(s, ALICE, describe(2, TOPIC))).results[0].error_code == ErrorCode.none
    assert (await call(s, ALICE, describe(2, "payments"))).results[0].error_code == (
        ErrorCode.topic_authorization_failed
    )
    assert (await call(s, ALICE, describe(4, "1"))).results[0].error_code == (
        ErrorCode.cluster_authorization_failed
    )
    assert (await call(s, ALICE, describe(32, GROUP))).results[0].error_code == (
        ErrorCode.group_authorization_failed
    )
    a = alter_configs.request

    def alter(name: str) -> alter_configs.IncrementalAlterConfigsRequest:
        return alter_configs.IncrementalAlterConfigsRequest(
            resources=(
                a.AlterConfigsResource(
                    resource_type=i8(2),
                    resource_name=name,
                    configs=(
                        a.AlterableConfig(
                            name="retention.ms", config_operation=i8(0), value="1000"
                        ),
                    ),
                ),
            ),
            validate_only=False,
        )

    assert (await call(s, ALICE, alter(TOPIC))).responses[0].error_code == ErrorCode.none
    assert (await call(s, BOB, alter(TOPIC))).responses[0].error_code == (
        ErrorCode.topic_authorization_failed
    )


# --- Cluster-level: DescribeCluster, InitProducerId, the ACL APIs


async def test_describe_cluster_needs_describe_on_the_cluster(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.CLUSTER, "kafka-cluster", Op.ALTER))  # implies DESCRIBE
    request = describe_cluster.DescribeClusterRequest(include_cluster_authorized_operations=True)
    ok = await call(s, ALICE, request)
    assert ok.error_code == ErrorCode.none
    assert ok.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)
    assert (await call(s, BOB, request)).error_code == ErrorCode.cluster_authorization_failed


async def test_describe_log_dirs_needs_describe_on_the_cluster(server: Server) -> None:
    """KafkaApis.handleDescribeLogDirsRequest: without DESCRIBE on the cluster, no result and
    CLUSTER_AUTHORIZATION_FAILED at the top (v3+); before v3 the empty list alone says it."""
    s = server.services
    await grant(s, acl(RT.CLUSTER, "kafka-cluster", Op.DESCRIBE))
    request = describe_log_dirs.DescribeLogDirsRequest(topics=None)
    ok = await call(s, ALICE, request)
    assert ok.error_code == ErrorCode.none
    (result,) = ok.results
    assert {TOPIC, "payments"} <= {t.name for t in result.topics}
    denied = await call(s, BOB, request)
    assert (denied.error_code, denied.results) == (ErrorCode.cluster_authorization_failed, ())
    # Topic ACLs do not stand in for the cluster's.
    await grant(s, acl(RT.TOPIC, "*", Op.ALL, BOB))
    assert (await call(s, BOB, request)).results == ()
    old = await call(s, BOB, describe_log_dirs_v1.DescribeLogDirsRequest(topics=None))
    assert old.results == ()


async def test_an_idempotent_producer_needs_write_on_some_topic_or_idempotent_write(
    server: Server,
) -> None:
    s = server.services
    request = init_producer_id.InitProducerIdRequest(
        transactional_id=None,
        transaction_timeout=i32Timedelta.parse(__import__("datetime").timedelta(seconds=60)),
        producer_id=ProducerId(-1),
        producer_epoch=i16(-1),
    )
    assert (await call(s, ALICE, request)).error_code == ErrorCode.cluster_authorization_failed
    await grant(s, acl(RT.TOPIC, "ord", Op.WRITE, pattern=PatternType.PREFIXED))
    assert (await call(s, ALICE, request)).error_code == ErrorCode.none
    await grant(s, acl(RT.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE, BOB))
    assert (await call(s, BOB, request)).error_code == ErrorCode.none
    # A DENY that covers the only ALLOW takes it away.
    await grant(s, acl(RT.TOPIC, "o", Op.WRITE, perm=Perm.DENY, pattern=PatternType.PREFIXED))
    assert (await call(s, ALICE, request)).error_code == ErrorCode.cluster_authorization_failed


async def test_acl_apis_need_alter_or_describe_on_the_cluster(server: Server) -> None:
    s = server.services
    create = create_acls.CreateAclsRequest(
        creations=(
            create_acls.request.AclCreation(
                resource_type=i8(RT.TOPIC),
                resource_name=TOPIC,
                resource_pattern_type=i8(PatternType.LITERAL),
                principal=BOB,
                host="*",
                operation=i8(Op.READ),
                permission_type=i8(Perm.ALLOW),
            ),
        )
    )
    refused = await call(s, ALICE, create)
    assert refused.results[0].error_code == ErrorCode.cluster_authorization_failed
    describe = describe_acls.DescribeAclsRequest(
        resource_type_filter=i8(RT.ANY),
        resource_name_filter=None,
        pattern_type_filter=i8(PatternType.ANY),
        principal_filter=None,
        host_filter=None,
        operation=i8(Op.ANY),
        permission_type=i8(Perm.ANY),
    )
    assert (await call(s, ALICE, describe)).error_code == ErrorCode.cluster_authorization_failed
    assert (await call(s, ADMIN, create)).results[0].error_code == ErrorCode.none
    listed = await call(s, ADMIN, describe)
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in listed.resources] == [
        (TOPIC, [BOB])
    ]


# --- Groups: FindCoordinator, ListGroups, DeleteGroups, ShareGroupDescribe


async def test_group_apis(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.GROUP, GROUP, Op.DESCRIBE))
    find = find_coordinator.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(GROUP, "x"))
    found = await call(s, ALICE, find)
    assert [c.error_code for c in found.coordinators] == [
        ErrorCode.none,
        ErrorCode.group_authorization_failed,
    ]
    described = await call(
        s,
        ALICE,
        share_describe.ShareGroupDescribeRequest(
            group_ids=(GroupId(GROUP), GroupId("x")), include_authorized_operations=True
        ),
    )
    assert [g.error_code for g in described.groups][1] == ErrorCode.group_authorization_failed
    deleted = await call(
        s, ALICE, delete_groups.DeleteGroupsRequest(groups_names=(GroupId(GROUP),))
    )
    assert deleted.results[0].error_code == ErrorCode.group_authorization_failed


async def test_list_groups_lists_only_describable_groups_without_cluster_describe(
    server: Server,
) -> None:
    s = server.services
    for g in (GROUP, "other"):
        await call(s, ADMIN, _heartbeat(g))
    await grant(s, acl(RT.GROUP, GROUP, Op.READ))  # implies DESCRIBE
    request = list_groups.ListGroupsRequest(states_filter=(), types_filter=())
    assert [g.group_id for g in (await call(s, ALICE, request)).groups] == [GROUP]
    await grant(s, acl(RT.CLUSTER, "kafka-cluster", Op.DESCRIBE))
    assert sorted(g.group_id for g in (await call(s, ALICE, request)).groups) == ["other", GROUP]


# --- Share groups: a principal without READ on the group receives nothing


def _heartbeat(group: str, member: str = "m1", topics: tuple[str, ...] = (TOPIC,)) -> Any:
    return heartbeat.ShareGroupHeartbeatRequest(
        group_id=GroupId(group),
        member_id=member,
        member_epoch=i32(0),
        rack_id=None,
        subscribed_topic_names=tuple(TopicName(t) for t in topics),
    )


def _share_fetch(group: str, member: str, topic_id: uuid.UUID, epoch: int = 0) -> Any:
    r = share_fetch.request
    return share_fetch.ShareFetchRequest(
        group_id=GroupId(group),
        member_id=member,
        share_session_epoch=i32(epoch),
        max_wait=NO_WAIT,
        min_bytes=i32(0),
        max_bytes=i32(1 << 20),
        max_records=i32(100),
        batch_size=i32(100),
        topics=(
            r.FetchTopic(
                topic_id=topic_id,
                partitions=(r.FetchPartition(partition_index=i32(0), acknowledgement_batches=()),),
            ),
        ),
        forgotten_topics_data=(),
    )


async def test_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(
    server: Server,
) -> None:
    s = server.services
    assert (await call(s, ALICE, _heartbeat(GROUP))).error_code == (
        ErrorCode.group_authorization_failed
    )
    await grant(s, acl(RT.GROUP, GROUP, Op.READ))
    assert (await call(s, ALICE, _heartbeat(GROUP))).error_code == (
        ErrorCode.topic_authorization_failed
    )
    await grant(s, acl(RT.TOPIC, TOPIC, Op.DESCRIBE))
    joined = await call(s, ALICE, _heartbeat(GROUP))
    assert joined.error_code == ErrorCode.none and joined.member_epoch > 0
    assert not s.coordinator.is_member(GROUP, "bob-member")


async def test_share_fetch_without_read_receives_nothing(server: Server) -> None:
    s = server.services
    topic = s.logs.topic(TOPIC)
    assert topic is not None
    await call(s, ADMIN, _produce(TOPIC))
    await grant(s, acl(RT.GROUP, GROUP, Op.READ), acl(RT.TOPIC, TOPIC, Op.DESCRIBE))
    assert (await call(s, ALICE, _heartbeat(GROUP, "alice-1"))).error_code == ErrorCode.none
    # READ on the group but not on the topic: the partition is refused, nothing acquired.
    fetched = await call(s, ALICE, _share_fetch(GROUP, "alice-1", topic.topic_id))
    assert fetched.error_code == ErrorCode.none
    (p,) = fetched.responses[0].partitions
    assert p.error_code == ErrorCode.topic_authorization_failed and p.acquired_records == ()
    # No READ on the group at all: the request is refused as a whole.
    refused = await call(s, BOB, _share_fetch(GROUP, "alice-1", topic.topic_id))
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert refused.responses == ()
    ack = share_ack.ShareAcknowledgeRequest(
        group_id=GroupId(GROUP), member_id="alice-1", share_session_epoch=i32(1), topics=()
    )
    assert (await call(s, BOB, ack)).error_code == ErrorCode.group_authorization_failed


async def test_a_share_session_belongs_to_the_principal_that_opened_it(server: Server) -> None:
    s = server.services
    topic = s.logs.topic(TOPIC)
    assert topic is not None
    await call(s, ADMIN, _produce(TOPIC))
    await call(s, ADMIN, _produce(TOPIC))
    for who in (ALICE, BOB):
        await grant(s, acl(RT.GROUP, GROUP, Op.READ, who), acl(RT.TOPIC, TOPIC, Op.READ, who))
    await call(s, ALICE, _heartbeat(GROUP, "alice-1"))
    opened = await call(s, ALICE, _share_fetch(GROUP, "alice-1", topic.topic_id))
    assert opened.error_code == ErrorCode.none
    # Bob, allowed on the group and topic, may not use (nor reopen) Alice's session.
    for epoch in (1, 0):
        hijack = await call(s, BOB, _share_fetch(GROUP, "alice-1", topic.topic_id, epoch))
        assert hijack.error_code == ErrorCode.group_authorization_failed
    ack = share_ack.ShareAcknowledgeRequest(
        group_id=GroupId(GROUP), member_id="alice-1", share_session_epoch=i32(1), topics=()
    )
    assert (await call(s, BOB, ack)).error_code == ErrorCode.group_authorization_failed
    assert (await call(s, ALICE, ack)).error_code == ErrorCode.none


# --- OffsetFetch, CreatePartitions and the share-group offset APIs


async def test_offset_fetch_needs_describe_on_the_group_and_its_topics(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.GROUP, GROUP, Op.DESCRIBE), acl(RT.TOPIC, TOPIC, Op.DESCRIBE))
    r = offset_fetch.request

    def request(group: str) -> offset_fetch.OffsetFetchRequest:
        topics = tuple(
            r.OffsetFetchRequestTopics(name=TopicName(t), partition_indexes=(i32(0),))
            for t in (TOPIC, "payments")
        )
        return offset_fetch.OffsetFetchRequest(
            groups=(r.OffsetFetchRequestGroup(group_id=GroupId(group), topics=topics),)
        )

    (allowed,) = (await call(s, ALICE, request(GROUP))).groups
    assert [t.partitions[0].error_code for t in allowed.topics] == [
        ErrorCode.none,
        ErrorCode.topic_authorization_failed,
    ]
    (refused,) = (await call(s, BOB, request(GROUP))).groups
    assert refused.error_code == ErrorCode.group_authorization_failed and refused.topics == ()


async def test_create_partitions_needs_alter_on_the_topic(server: Server) -> None:
    s = server.services
    await grant(s, acl(RT.TOPIC, TOPIC, Op.ALTER))
    r = create_partitions.request

    def grow(name: str) -> create_partitions.CreatePartitionsRequest:
        return create_partitions.CreatePartitionsRequest(
            topics=(r.CreatePartitionsTopic(name=TopicName(name), count=i32(2), assignments=None),),
            timeout=NO_WAIT,
            validate_only=False,
        )

    assert (await call(s, ALICE, grow(TOPIC))).results[0].error_code == ErrorCode.none
    assert (await call(s, ALICE, grow("payments"))).results[0].error_code == (
        ErrorCode.topic_authorization_failed
    )
    assert s.logs.topic("payments").partitions == 1  # type: ignore[union-attr]


async def test_share_group_offset_apis(server: Server) -> None:
    s = server.services
    # The group exists and is empty (offsets are reset only in an empty group).
    await call(s, ADMIN, _heartbeat(GROUP))
    leave = heartbeat.ShareGroupHeartbeatRequest(
        group_id=GroupId(GROUP), member_id="m1", member_epoch=i32(-1), rack_id=None,
        subscribed_topic_names=None,
    )  # fmt: skip
    await call(s, ADMIN, leave)
    await grant(s, acl(RT.GROUP, GROUP, Op.DESCRIBE), acl(RT.TOPIC, TOPIC, Op.DESCRIBE))
    d = describe_offsets.request
    described = await call(
        s,
        ALICE,
        describe_offsets.DescribeShareGroupOffsetsRequest(
            groups=(
                d.DescribeShareGroupOffsetsRequestGroup(
                    group_id=GroupId(GROUP),
                    topics=tuple(
                        d.DescribeShareGroupOffsetsRequestTopic(
                            topic_name=TopicName(t), partitions=(i32(0),)
                        )
                        for t in (TOPIC, "payments")
                    ),
                ),
            )
        ),
    )
    (group,) = described.groups
    assert group.error_code == ErrorCode.none
    assert [t.partitions[0].error_code for t in group.topics] == [
        ErrorCode.none,
        ErrorCode.topic_authorization_failed,
    ]
    a = alter_offsets.request
    alter = alter_offsets.AlterShareGroupOffsetsRequest(
        group_id=GroupId(GROUP),
        topics=(
            a.AlterShareGroupOffsetsRequestTopic(
                topic_name=TopicName(TOPIC),
                partitions=(
                    a.AlterShareGroupOffsetsRequestPartition(
                        partition_index=i32(0), start_offset=i64(0)
                    ),
                ),
            ),
        ),
    )
    delete = delete_offsets.DeleteShareGroupOffsetsRequest(
        group_id=GroupId(GROUP),
        topics=(
            delete_offsets.request.DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(TOPIC)),
        ),
    )
    # DESCRIBE on the group allows neither a reset (READ) nor a delete (DELETE).
    assert (await call(s, ALICE, alter)).error_code == ErrorCode.group_authorization_failed
    assert (await call(s, ALICE, delete)).error_code == ErrorCode.group_authorization_failed
    await grant(s, acl(RT.GROUP, GROUP, Op.READ), acl(RT.GROUP, GROUP, Op.DELETE))
    # ... and the topic needs READ too.
    altered = await call(s, ALICE, alter)
    assert altered.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    deleted = await call(s, ALICE, delete)
    assert deleted.responses[0].error_code == ErrorCode.topic_authorization_failed
    await grant(s, acl(RT.TOPIC, TOPIC, Op.READ))
    altered = await call(s, ALICE, alter)
    assert altered.responses[0].partitions[0].error_code == ErrorCode.none


async def test_acknowledgements_need_read_on_the_topic(server: Server) -> None:
    s = server.services
    assert s.acls is not None
    topic = s.logs.topic(TOPIC)
    assert topic is not None
    read_topic = acl(RT.TOPIC, TOPIC, Op.READ)
    await grant(s, acl(RT.GROUP, GROUP, Op.READ), read_topic)
    s.group_configs.alter(GROUP, {"share.auto.offset.reset": "earliest"})
    await call(s, ADMIN, _produce(TOPIC))
    await call(s, ALICE, _heartbeat(GROUP, "alice-1"))
    fetched = await call(s, ALICE, _share_fetch(GROUP, "alice-1", topic.topic_id))
    assert fetched.responses[0].partitions[0].acquired_records  # offset 0 is Alice's
    await s.acls.delete([AclBindingFilter(RT.TOPIC, TOPIC, PatternType.LITERAL, ALICE)])
    r = share_ack.request

    def ack(epoch: int) -> share_ack.ShareAcknowledgeRequest:
        batch = r.AcknowledgementBatch(
            first_offset=i64(0), last_offset=i64(0), acknowledge_types=(i8(1),)
        )
        partition = r.AcknowledgePartition(partition_index=i32(0), acknowledgement_batches=(batch,))
        return share_ack.ShareAcknowledgeRequest(
            group_id=GroupId(GROUP),
            member_id="alice-1",
            share_session_epoch=i32(epoch),
            topics=(r.AcknowledgeTopic(topic_id=topic.topic_id, partitions=(partition,)),),
        )

    refused = await call(s, ALICE, ack(1))
    assert refused.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    sp = s.share_partitions.get(GROUP, topic.topic_id, 0, s.now_ms())
    assert sp is not None and sp.acquired_count() == 1  # nothing was acknowledged
    await grant(s, read_topic)
    accepted = await call(s, ALICE, ack(2))
    assert accepted.responses[0].partitions[0].error_code == ErrorCode.none
    assert sp.acquired_count() == 0
