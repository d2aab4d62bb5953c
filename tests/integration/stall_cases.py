"""The worst hostile-but-valid request of each API the broker serves, as frames (see
`test_stalls.py`): as many elements as one array may hold (1,000,000, Kafka's cap) or the frame
limit allows, built by `tests.big_frames` in well under a second each.
"""

from __future__ import annotations

import datetime
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from protocol.framing import frame
from protocol.messages import build
from protocol.messages import encode_request
from protocol.messages import request_type
from protocol.wire import INT32
from tests.big_frames import entity_bytes
from tests.big_frames import grown
from tests.big_frames import string_bytes

MILLION = 1_000_000
# A partition index no test topic has, written over by each element's own (see `big_frames`).
SENTINEL = 0x5A5A5A5A
SENTINEL_BYTES = INT32.pack(SENTINEL)


@dataclass(frozen=True)
class Env:
    """What the requests name: a topic with records, its id, a share group with a member."""

    topic: str
    topic_id: uuid.UUID
    share_group: str
    member: str


@dataclass(frozen=True)
class Hostile:
    """One API's worst request: `full` elements (the worst a client could send within the
    limits), or `quick` in the standing test (None: in the full run only). Either is far more
    than the ~50 ms of work a slice may take."""

    family: str
    name: str
    api_key: int
    version: int
    build: Callable[[Env, int], bytes]
    full: int = MILLION
    quick: int | None = None


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _module(key: int, version: int) -> ModuleType:
    return sys.modules[request_type(key, version).__module__]


def _index(i: int) -> bytes:
    return INT32.pack(i)


def _name(prefix: str, i: int) -> bytes:
    return b"%s%09d" % (prefix.encode(), i)


def _names(key: int, version: int, field: str, prefix: str, count: int, **values: Any) -> bytes:
    """A request whose array of strings `field` holds `count` distinct names."""
    m = request_type(key, version)
    first = f"{prefix}{0:09d}"
    body = build(m, **{field: (first,)}, **values)
    one = string_bytes(first, bool(m.__flexible__))
    fill = _name_fill(prefix)
    return grown(body, one, count, first.encode(), fill)


def _name_fill(prefix: str) -> Callable[[int], bytes]:
    return lambda i: _name(prefix, i)


def _partitions(
    count: int,
    key: int,
    version: int,
    make: Callable[[ModuleType, tuple[Any, ...]], Any],
    partition: Callable[[ModuleType], Any],
) -> bytes:
    """A request naming one topic (made by `make` around a partitions tuple) with `count`
    partitions, numbered 0 to count - 1; `partition` makes one, of index `SENTINEL`."""
    m = _module(key, version)
    one = partition(m)
    body = make(m, (one,))
    return grown(body, entity_bytes(one), count, SENTINEL_BYTES, _index)


def _entities(
    count: int,
    key: int,
    version: int,
    make: Callable[[ModuleType, tuple[Any, ...]], Any],
    element: Callable[[ModuleType, str], Any],
    prefix: str,
) -> bytes:
    """A request whose array (made by `make`) holds `count` elements, each naming its own
    `prefix`-ed name (`element` makes one around a name)."""
    m = _module(key, version)
    first = f"{prefix}{0:09d}"
    one = element(m, first)
    body = make(m, (one,))
    return grown(body, entity_bytes(one), count, first.encode(), _name_fill(prefix))


# --- the requests ---------------------------------------------------------------------------


def metadata(env: Env, n: int) -> bytes:
    """300,000 unknown topic names (about 7 MB), no auto-creation."""
    m = _module(3, 12)
    first = "stall-missing-000000000"
    one = build(m.MetadataRequestTopic, name=first, topic_id=None)
    body = build(m.MetadataRequest, topics=(one,), allow_auto_topic_creation=False)
    return grown(body, entity_bytes(one), n, first.encode(), _name_fill("stall-missing-"))


def list_offsets(env: Env, n: int) -> bytes:
    return _partitions(
        n, 2, 8,
        lambda m, ps: build(m.ListOffsetsRequest, replica_id=-1, topics=(
            build(m.ListOffsetsTopic, name=env.topic, partitions=ps),)),
        lambda m: build(m.ListOffsetsPartition, partition_index=SENTINEL, timestamp=-1),
    )  # fmt: skip


def produce(env: Env, n: int) -> bytes:
    return _partitions(
        n, 0, 12,
        lambda m, ps: build(m.ProduceRequest, acks=-1, timeout=_ms(30_000), topic_data=(
            build(m.TopicProduceData, name=env.topic, partition_data=ps),)),
        lambda m: build(m.PartitionProduceData, index=SENTINEL, records=None),
    )  # fmt: skip


def fetch(env: Env, n: int) -> bytes:
    return _partitions(
        n, 1, 12,
        lambda m, ps: build(m.FetchRequest, replica_id=-1, max_wait=_ms(0), max_bytes=1 << 20,
                            session_epoch=-1, topics=(
            build(m.FetchTopic, topic=env.topic, partitions=ps),)),
        lambda m: build(m.FetchPartition, partition=SENTINEL, partition_max_bytes=1 << 20),
    )  # fmt: skip


def share_fetch_unknown_member(env: Env, n: int) -> bytes:
    return _partitions(
        n, 78, 1,
        lambda m, ps: build(m.ShareFetchRequest, group_id=env.share_group,
                            member_id=uuid.uuid4().hex[:22], share_session_epoch=0,
                            max_wait=_ms(0), max_bytes=1 << 20, max_records=500, batch_size=500,
                            topics=(build(m.FetchTopic, topic_id=env.topic_id, partitions=ps),)),
        lambda m: build(m.FetchPartition, partition_index=SENTINEL),
    )  # fmt: skip


def share_acknowledge(env: Env, n: int) -> bytes:
    return _partitions(
        n, 79, 1,
        lambda m, ps: build(m.ShareAcknowledgeRequest, group_id=env.share_group,
                            member_id=env.member, share_session_epoch=1, topics=(
            build(m.AcknowledgeTopic, topic_id=env.topic_id, partitions=ps),)),
        lambda m: build(m.AcknowledgePartition, partition_index=SENTINEL,
                        acknowledgement_batches=(build(m.AcknowledgementBatch, first_offset=0,
                                                       last_offset=0, acknowledge_types=(1,)),)),
    )  # fmt: skip


def txn_share_acknowledge(env: Env, n: int) -> bytes:
    """Shoal's own TxnShareAcknowledge (api key 30000), from a transactional id never seen."""
    return _partitions(
        n, 30000, 0,
        lambda m, ps: build(m.TxnShareAcknowledgeRequest, transactional_id="stall-txn",
                            producer_id=1, producer_epoch=0, group_id=env.share_group,
                            member_id=env.member, topics=(
            build(m.TxnShareAcknowledgeTopic, name=env.topic, partitions=ps),)),
        lambda m: build(m.TxnShareAcknowledgePartition, partition_index=SENTINEL,
                        acknowledgement_batches=(build(m.TxnShareAcknowledgementBatch,
                            first_offset=0, last_offset=0, acknowledge_types=(1,)),)),
    )  # fmt: skip


def offset_commit(env: Env, n: int) -> bytes:
    return _partitions(
        n, 8, 9,
        lambda m, ps: build(m.OffsetCommitRequest, group_id="stall-group",
                            generation_id_or_member_epoch=-1, topics=(
            build(m.OffsetCommitRequestTopic, name=env.topic, partitions=ps),)),
        lambda m: build(m.OffsetCommitRequestPartition, partition_index=SENTINEL,
                        committed_offset=0, committed_leader_epoch=-1),
    )  # fmt: skip


def offset_fetch(env: Env, n: int) -> bytes:
    m = _module(9, 9)
    topic = build(m.OffsetFetchRequestTopics, name=env.topic, partition_indexes=(SENTINEL,))
    group = build(m.OffsetFetchRequestGroup, group_id="stall-group", topics=(topic,))
    body = build(m.OffsetFetchRequest, groups=(group,))
    return grown(body, SENTINEL_BYTES, n, SENTINEL_BYTES, _index)


def offset_delete(env: Env, n: int) -> bytes:
    return _partitions(
        n, 47, 0,
        lambda m, ps: build(m.OffsetDeleteRequest, group_id="stall-group", topics=(
            build(m.OffsetDeleteRequestTopic, name=env.topic, partitions=ps),)),
        lambda m: build(m.OffsetDeleteRequestPartition, partition_index=SENTINEL),
    )  # fmt: skip


def find_coordinator(env: Env, n: int) -> bytes:
    return _names(10, 6, "coordinator_keys", "stall-group-", n)


def describe_groups(env: Env, n: int) -> bytes:
    return _names(15, 6, "groups", "stall-group-", n)


def list_groups(env: Env, n: int) -> bytes:
    return _names(16, 5, "states_filter", "state-", n)


def delete_groups(env: Env, n: int) -> bytes:
    return _names(42, 2, "groups_names", "stall-group-", n)


def join_group(env: Env, n: int) -> bytes:
    return _entities(
        n, 11, 9,
        lambda m, ps: build(m.JoinGroupRequest, group_id="stall-join", session_timeout=_ms(10_000),
                            rebalance_timeout=_ms(10_000), protocol_type="consumer", protocols=ps),
        lambda m, name: build(m.JoinGroupRequestProtocol, name=name, metadata=b""),
        "range-",
    )  # fmt: skip


def sync_group(env: Env, n: int) -> bytes:
    return _entities(
        n, 14, 5,
        lambda m, ps: build(m.SyncGroupRequest, group_id="stall-join", generation_id=1,
                            member_id="stall-member", protocol_type="consumer",
                            protocol_name="range", assignments=ps),
        lambda m, name: build(m.SyncGroupRequestAssignment, member_id=name, assignment=b""),
        "member-",
    )  # fmt: skip


def leave_group(env: Env, n: int) -> bytes:
    return _entities(
        n, 13, 5,
        lambda m, ps: build(m.LeaveGroupRequest, group_id="stall-join", members=ps),
        lambda m, name: build(m.MemberIdentity, member_id=name),
        "member-",
    )  # fmt: skip


def consumer_group_heartbeat(env: Env, n: int) -> bytes:
    return _names(
        68, 1, "subscribed_topic_names", "stall-topic-", n,
        group_id="stall-consumer", member_id="m" * 22, member_epoch=0,
        rebalance_timeout=_ms(10_000), topic_partitions=(),
    )  # fmt: skip


def consumer_group_describe(env: Env, n: int) -> bytes:
    return _names(69, 1, "group_ids", "stall-group-", n)


def share_group_heartbeat(env: Env, n: int) -> bytes:
    return _names(
        76, 1, "subscribed_topic_names", "stall-topic-", n,
        group_id="stall-share-hb", member_id="h" * 22, member_epoch=0,
    )  # fmt: skip


def share_group_describe(env: Env, n: int) -> bytes:
    return _names(77, 1, "group_ids", "stall-group-", n)


def describe_share_group_offsets(env: Env, n: int) -> bytes:
    m = _module(90, 1)
    topic = build(m.DescribeShareGroupOffsetsRequestTopic, topic_name=env.topic,
                  partitions=(SENTINEL,))  # fmt: skip
    group = build(m.DescribeShareGroupOffsetsRequestGroup, group_id=env.share_group,
                  topics=(topic,))  # fmt: skip
    body = build(m.DescribeShareGroupOffsetsRequest, groups=(group,))
    return grown(body, SENTINEL_BYTES, n, SENTINEL_BYTES, _index)


def alter_share_group_offsets(env: Env, n: int) -> bytes:
    return _partitions(
        n, 91, 0,
        lambda m, ps: build(m.AlterShareGroupOffsetsRequest, group_id="stall-empty-share",
                            topics=(build(m.AlterShareGroupOffsetsRequestTopic,
                                          topic_name=env.topic, partitions=ps),)),
        lambda m: build(m.AlterShareGroupOffsetsRequestPartition, partition_index=SENTINEL,
                        start_offset=0),
    )  # fmt: skip


def delete_share_group_offsets(env: Env, n: int) -> bytes:
    return _entities(
        n, 92, 0,
        lambda m, ts: build(m.DeleteShareGroupOffsetsRequest, group_id="stall-empty-share",
                            topics=ts),
        lambda m, name: build(m.DeleteShareGroupOffsetsRequestTopic, topic_name=name),
        "stall-topic-",
    )  # fmt: skip


def create_topics(env: Env, n: int) -> bytes:
    """One topic of `n` partitions: the most one request may add is 10,000
    (max.partitions.per.request); each costs two fsyncs."""
    m = _module(19, 7)
    topic = build(m.CreatableTopic, name=f"stall-created-{n}", num_partitions=n,
                  replication_factor=1)  # fmt: skip
    return frame(encode_request(
        build(m.CreateTopicsRequest, topics=(topic,), timeout=_ms(120_000)), 1, "stall-test"
    ))  # fmt: skip


def metadata_auto_created(env: Env, n: int) -> bytes:
    """`n` new topic names, auto-created (one partition each, two fsyncs)."""
    m = _module(3, 12)
    prefix = f"stall-auto-{n}-"
    first = f"{prefix}{0:09d}"
    one = build(m.MetadataRequestTopic, name=first, topic_id=None)
    body = build(m.MetadataRequest, topics=(one,), allow_auto_topic_creation=True)
    return grown(body, entity_bytes(one), n, first.encode(), _name_fill(prefix))


def describe_cluster(env: Env, n: int) -> bytes:
    """No array to grow: the worst DescribeCluster asks for the authorized operations."""
    m = _module(60, 1)
    body = build(m.DescribeClusterRequest, include_cluster_authorized_operations=True)
    return frame(encode_request(body, 1, "stall-test"))


def describe_log_dirs(env: Env, n: int) -> bytes:
    """One topic named with `n` partitions (all but a few unknown): each is looked up and
    left out; `test_describe_log_dirs` holds a broker of 50,000 partitions to its slices."""
    m = _module(35, 4)
    topic = build(m.DescribableLogDirTopic, topic=env.topic, partitions=(SENTINEL,))
    body = build(m.DescribeLogDirsRequest, topics=(topic,))
    return grown(body, SENTINEL_BYTES, n, SENTINEL_BYTES, _index)


def delete_topics(env: Env, n: int) -> bytes:
    return _entities(
        n, 20, 6,
        lambda m, ts: build(m.DeleteTopicsRequest, topics=ts, timeout=_ms(30_000)),
        lambda m, name: build(m.DeleteTopicState, name=name, topic_id=uuid.UUID(int=0)),
        "stall-missing-",
    )  # fmt: skip


def create_partitions(env: Env, n: int) -> bytes:
    return _entities(
        n, 37, 3,
        lambda m, ts: build(m.CreatePartitionsRequest, topics=ts, timeout=_ms(30_000)),
        lambda m, name: build(m.CreatePartitionsTopic, name=name, count=2, assignments=None),
        "stall-missing-",
    )  # fmt: skip


def delete_records(env: Env, n: int) -> bytes:
    return _partitions(
        n, 21, 2,
        lambda m, ps: build(m.DeleteRecordsRequest, timeout=_ms(30_000), topics=(
            build(m.DeleteRecordsTopic, name=env.topic, partitions=ps),)),
        lambda m: build(m.DeleteRecordsPartition, partition_index=SENTINEL, offset=0),
    )  # fmt: skip


def describe_configs(env: Env, n: int) -> bytes:
    return _entities(
        n, 32, 4,
        lambda m, rs: build(m.DescribeConfigsRequest, resources=rs),
        lambda m, name: build(m.DescribeConfigsResource, resource_type=2, resource_name=name,
                              configuration_keys=None),
        "stall-missing-",
    )  # fmt: skip


def incremental_alter_configs(env: Env, n: int) -> bytes:
    return _entities(
        n, 44, 1,
        lambda m, rs: build(m.IncrementalAlterConfigsRequest, resources=rs, validate_only=True),
        lambda m, name: build(m.AlterConfigsResource, resource_type=2, resource_name=name,
                              configs=()),
        "stall-missing-",
    )  # fmt: skip


def incremental_alter_configs_written(env: Env, n: int) -> bytes:
    """`n` resources, each the topic that exists with a stored config set anew (a request may
    name a resource again), then one that deletes it: `n` + 1 writes of its file, each with
    two fsyncs. On the loop, one write held it for up to 190 ms on the shared development
    disk (p99 158 ms, median 8.5 ms, load 9-11)."""
    m = _module(44, 1)

    def resource(op: int, value: str | None) -> Any:
        config = build(
            m.AlterableConfig, name="max.message.bytes", config_operation=op, value=value
        )
        return build(
            m.AlterConfigsResource, resource_type=2, resource_name=env.topic, configs=(config,)
        )

    resources = tuple(resource(0, str(1_000_000 + i)) for i in range(n))
    body = build(
        m.IncrementalAlterConfigsRequest,
        resources=(*resources, resource(1, None)),
        validate_only=False,
    )
    return frame(encode_request(body, 1, "stall-test"))  # fmt: skip


def alter_configs(env: Env, n: int) -> bytes:
    return _entities(
        n, 33, 2,
        lambda m, rs: build(m.AlterConfigsRequest, resources=rs, validate_only=True),
        lambda m, name: build(m.AlterConfigsResource, resource_type=2, resource_name=name,
                              configs=()),
        "stall-missing-",
    )  # fmt: skip


def create_acls(env: Env, n: int) -> bytes:
    return _entities(
        n, 30, 3,
        lambda m, cs: build(m.CreateAclsRequest, creations=cs),
        lambda m, name: build(m.AclCreation, resource_type=2, resource_name=name,
                              resource_pattern_type=3, principal="User:nobody", host="*",
                              operation=3, permission_type=3),
        "stall-acl-",
    )  # fmt: skip


def describe_acls(env: Env, n: int) -> bytes:
    """No array to grow: the worst DescribeAcls matches every binding (those `create_acls`
    made, when it ran before)."""
    m = _module(29, 3)
    body = build(m.DescribeAclsRequest, resource_type_filter=1, resource_name_filter=None,
                 pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                 permission_type=1)  # fmt: skip
    return frame(encode_request(body, 1, "stall-test"))


def delete_acls(env: Env, n: int) -> bytes:
    return _entities(
        n, 31, 3,
        lambda m, fs: build(m.DeleteAclsRequest, filters=fs),
        lambda m, name: build(m.DeleteAclsFilter, resource_type_filter=2,
                              resource_name_filter=name, pattern_type_filter=3,
                              principal_filter="User:nobody", host_filter="*", operation=3,
                              permission_type=3),
        "stall-acl-",
    )  # fmt: skip


def describe_user_scram_credentials(env: Env, n: int) -> bytes:
    return _entities(
        n, 50, 0,
        lambda m, us: build(m.DescribeUserScramCredentialsRequest, users=us),
        lambda m, name: build(m.UserName, name=name),
        "stall-user-",
    )  # fmt: skip


def alter_user_scram_credentials(env: Env, n: int) -> bytes:
    return _entities(
        n, 51, 0,
        lambda m, ds: build(m.AlterUserScramCredentialsRequest, deletions=ds, upsertions=()),
        lambda m, name: build(m.ScramCredentialDeletion, name=name, mechanism=1),
        "stall-user-",
    )  # fmt: skip


def add_partitions_to_txn(env: Env, n: int) -> bytes:
    m = _module(24, 3)
    topic = build(m.AddPartitionsToTxnTopic, name=env.topic, partitions=(SENTINEL,))
    body = build(m.AddPartitionsToTxnRequest, v3_and_below_transactional_id="stall-txn",
                 v3_and_below_producer_id=0, v3_and_below_producer_epoch=0,
                 v3_and_below_topics=(topic,))  # fmt: skip
    return grown(body, SENTINEL_BYTES, n, SENTINEL_BYTES, _index)


def write_txn_markers(env: Env, n: int) -> bytes:
    m = _module(27, 1)
    topic = build(m.WritableTxnMarkerTopic, name=env.topic, partition_indexes=(SENTINEL,))
    marker = build(m.WritableTxnMarker, producer_id=0, producer_epoch=0,
                   transaction_result=False, topics=(topic,), coordinator_epoch=0)  # fmt: skip
    body = build(m.WriteTxnMarkersRequest, markers=(marker,))
    return grown(body, SENTINEL_BYTES, n, SENTINEL_BYTES, _index)


def initialize_share_group_state(env: Env, n: int) -> bytes:
    return _partitions(
        n, 83, 0,
        lambda m, ps: build(m.InitializeShareGroupStateRequest, group_id=env.share_group,
                            topics=(build(m.InitializeStateData, topic_id=env.topic_id,
                                          partitions=ps),)),
        lambda m: build(m.PartitionData, partition=SENTINEL, state_epoch=0, start_offset=0),
    )  # fmt: skip


def delete_share_group_state(env: Env, n: int) -> bytes:
    return _partitions(
        n, 86, 0,
        lambda m, ps: build(m.DeleteShareGroupStateRequest, group_id=env.share_group,
                            topics=(build(m.DeleteStateData, topic_id=env.topic_id,
                                          partitions=ps),)),
        lambda m: build(m.PartitionData, partition=SENTINEL),
    )  # fmt: skip


def read_share_group_state_summary(env: Env, n: int) -> bytes:
    return _partitions(
        n, 87, 1,
        lambda m, ps: build(m.ReadShareGroupStateSummaryRequest, group_id=env.share_group,
                            topics=(build(m.ReadStateSummaryData, topic_id=env.topic_id,
                                          partitions=ps),)),
        lambda m: build(m.PartitionData, partition=SENTINEL, leader_epoch=0),
    )  # fmt: skip


def txn_offset_commit(env: Env, n: int) -> bytes:
    return _partitions(
        n, 28, 3,
        lambda m, ps: build(m.TxnOffsetCommitRequest, transactional_id="stall-txn",
                            group_id="stall-group", producer_id=0, producer_epoch=0,
                            generation_id=-1, member_id="", topics=(
            build(m.TxnOffsetCommitRequestTopic, name=env.topic, partitions=ps),)),
        lambda m: build(m.TxnOffsetCommitRequestPartition, partition_index=SENTINEL,
                        committed_offset=0, committed_leader_epoch=-1),
    )  # fmt: skip


def describe_producers(env: Env, n: int) -> bytes:
    m = _module(61, 0)
    topic = build(m.TopicRequest, name=env.topic, partition_indexes=(SENTINEL,))
    body = build(m.DescribeProducersRequest, topics=(topic,))
    return grown(body, SENTINEL_BYTES, n, SENTINEL_BYTES, _index)


def describe_transactions(env: Env, n: int) -> bytes:
    return _names(65, 0, "transactional_ids", "stall-txn-", n)


def list_transactions(env: Env, n: int) -> bytes:
    return _names(66, 1, "state_filters", "stall-state-", n, producer_id_filters=(),
                  duration_filter=-1)  # fmt: skip


K = 1_000
# Per family, the request that stalled longest before it was fixed (and a second where it takes
# another path: a write, a Metadata that creates topics, DeleteAcls over the bindings that
# CreateAcls made) also runs in the standing test (`quick`); `make stalls` runs every one at
# its `full` size. Their order matters where one request acts on what an earlier one made.
CASES = [
    Hostile("produce", "produce", 0, 12, produce, quick=100 * K),
    Hostile("fetch", "fetch", 1, 12, fetch, quick=50 * K),
    Hostile("share fetch/ack", "share_fetch", 78, 1, share_fetch_unknown_member, quick=500 * K),
    Hostile("share fetch/ack", "share_acknowledge", 79, 1, share_acknowledge, quick=50 * K),
    Hostile("share fetch/ack", "txn_share_acknowledge", 30000, 0, txn_share_acknowledge,
            quick=50 * K),
    Hostile("metadata", "metadata", 3, 12, metadata, full=300 * K, quick=30 * K),
    Hostile("metadata", "metadata_auto_created", 3, 12, metadata_auto_created, full=2 * K,
            quick=100),
    Hostile("list offsets", "list_offsets", 2, 8, list_offsets, quick=50 * K),
    Hostile("offsets", "offset_commit", 8, 9, offset_commit, quick=100 * K),
    Hostile("offsets", "offset_fetch", 9, 9, offset_fetch, quick=50 * K),
    Hostile("offsets", "offset_delete", 47, 0, offset_delete),
    Hostile("groups", "find_coordinator", 10, 6, find_coordinator),
    Hostile("groups", "describe_groups", 15, 6, describe_groups, quick=50 * K),
    Hostile("groups", "list_groups", 16, 5, list_groups),
    Hostile("groups", "delete_groups", 42, 2, delete_groups),
    Hostile("groups", "join_group", 11, 9, join_group),
    Hostile("groups", "sync_group", 14, 5, sync_group),
    Hostile("groups", "leave_group", 13, 5, leave_group),
    Hostile("groups", "consumer_group_heartbeat", 68, 1, consumer_group_heartbeat),
    Hostile("groups", "consumer_group_describe", 69, 1, consumer_group_describe),
    Hostile("share groups", "share_group_heartbeat", 76, 1, share_group_heartbeat),
    Hostile("share groups", "share_group_describe", 77, 1, share_group_describe, quick=50 * K),
    Hostile("share groups", "describe_share_group_offsets", 90, 1, describe_share_group_offsets),
    Hostile("share groups", "alter_share_group_offsets", 91, 0, alter_share_group_offsets),
    Hostile("share groups", "delete_share_group_offsets", 92, 0, delete_share_group_offsets),
    Hostile("topic admin", "create_topics", 19, 7, create_topics, full=10 * K, quick=200),
    Hostile("topic admin", "delete_topics", 20, 6, delete_topics, quick=100 * K),
    Hostile("topic admin", "create_partitions", 37, 3, create_partitions),
    Hostile("topic admin", "delete_records", 21, 2, delete_records),
    Hostile("configs", "describe_configs", 32, 4, describe_configs, quick=50 * K),
    Hostile("configs", "incremental_alter_configs", 44, 1, incremental_alter_configs),
    Hostile("configs", "alter_configs", 33, 2, alter_configs),
    Hostile("configs", "incremental_alter_configs_written", 44, 1,
            incremental_alter_configs_written, full=10 * K, quick=1_000),
    Hostile("acls", "create_acls", 30, 3, create_acls, quick=20 * K),
    Hostile("acls", "describe_acls", 29, 3, describe_acls, full=1, quick=1),
    Hostile("acls", "delete_acls", 31, 3, delete_acls, quick=20 * K),
    Hostile("scram", "describe_user_scram_credentials", 50, 0, describe_user_scram_credentials,
            quick=50 * K),
    Hostile("scram", "alter_user_scram_credentials", 51, 0, alter_user_scram_credentials,
            quick=50 * K),
    Hostile("cluster", "describe_cluster", 60, 1, describe_cluster, full=1, quick=1),
    Hostile("cluster", "describe_log_dirs", 35, 4, describe_log_dirs, quick=100 * K),
    Hostile("transactions", "add_partitions_to_txn", 24, 3, add_partitions_to_txn,
            quick=50 * K),
    Hostile("transactions", "txn_offset_commit", 28, 3, txn_offset_commit, quick=50 * K),
    Hostile("transactions", "write_txn_markers", 27, 1, write_txn_markers, quick=50 * K),
    Hostile("share state", "initialize_share_group_state", 83, 0, initialize_share_group_state,
            quick=50 * K),
    Hostile("share state", "delete_share_group_state", 86, 0, delete_share_group_state,
            quick=50 * K),
    Hostile("share state", "read_share_group_state_summary", 87, 1,
            read_share_group_state_summary, quick=50 * K),
    Hostile("transactions", "describe_producers", 61, 0, describe_producers, quick=50 * K),
    Hostile("transactions", "describe_transactions", 65, 0, describe_transactions,
            quick=50 * K),
    Hostile("transactions", "list_transactions", 66, 1, list_transactions, quick=50 * K),
]  # fmt: skip
