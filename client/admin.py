"""An asyncio admin client: topics, configs (GROUP configs too: resource type 32), offsets."""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Iterable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from types import TracebackType
from typing import Any
from typing import Literal

from kio.schema.errors import ErrorCode

from client import acls
from client import group_describe
from client import group_offsets
from client.cluster import API_CREATE_TOPICS
from client.cluster import API_DELETE_TOPICS
from client.cluster import API_DESCRIBE_CONFIGS
from client.cluster import API_INCREMENTAL_ALTER_CONFIGS
from client.cluster import API_LIST_OFFSETS
from client.cluster import Cluster
from client.cluster import TopicInfo
from client.errors import KafkaError
from client.errors import TopicError
from client.errors import error_for
from client.errors import raise_for
from client.group_describe import ConsumerGroupDescription
from client.group_offsets import CommittedOffset
from client.kio_apis import ALTER_SHARE_GROUP_OFFSETS
from client.kio_apis import CREATE_PARTITIONS
from client.kio_apis import CREATE_TOPICS
from client.kio_apis import DELETE_GROUPS
from client.kio_apis import DELETE_RECORDS
from client.kio_apis import DELETE_SHARE_GROUP_OFFSETS
from client.kio_apis import DELETE_TOPICS
from client.kio_apis import DELETE_TOPICS_V6
from client.kio_apis import DESCRIBE_CONFIGS
from client.kio_apis import DESCRIBE_SHARE_GROUP_OFFSETS
from client.kio_apis import INCREMENTAL_ALTER_CONFIGS
from client.kio_apis import LIST_GROUPS
from client.kio_apis import LIST_OFFSETS
from client.kio_apis import SHARE_GROUP_DESCRIBE
from client.security import Security
from protocol import api_keys
from protocol.acl import AclBinding
from protocol.acl import AclBindingFilter
from protocol.messages import build

_TIMEOUT = datetime.timedelta(seconds=30)
API_DELETE_RECORDS = api_keys.DELETE_RECORDS
API_CREATE_PARTITIONS = api_keys.CREATE_PARTITIONS
API_LIST_GROUPS = api_keys.LIST_GROUPS
API_DELETE_GROUPS = api_keys.DELETE_GROUPS
API_SHARE_GROUP_DESCRIBE = api_keys.SHARE_GROUP_DESCRIBE
API_DESCRIBE_SHARE_GROUP_OFFSETS = api_keys.DESCRIBE_SHARE_GROUP_OFFSETS
API_ALTER_SHARE_GROUP_OFFSETS = api_keys.ALTER_SHARE_GROUP_OFFSETS
API_DELETE_SHARE_GROUP_OFFSETS = api_keys.DELETE_SHARE_GROUP_OFFSETS


class ConfigResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a config's value comes from (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool


class _AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1


# ListOffsets special timestamps (KIP-79, KIP-734).
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
OffsetSpec = Literal["earliest", "latest", "max_timestamp"] | int
_SPECS = {"earliest": EARLIEST, "latest": LATEST, "max_timestamp": MAX_TIMESTAMP}


class Admin:
    def __init__(
        self, bootstrap: str, *, client_id: str = "shoal-admin", security: Security | None = None
    ) -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id, security=security)

    async def __aenter__(self) -> Admin:
        await self.cluster.bootstrap()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
    ) -> uuid.UUID | None:
        """Create a topic; returns its id (None before CreateTopics v7).

        :raises TopicError: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION...
        """
        await self.cluster.bootstrap()
        version = self.cluster.version(API_CREATE_TOPICS, 2, 7)
        m = CREATE_TOPICS.requests(version)
        topic = build(
            m.CreatableTopic,
            name=name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            assignments=(),
            configs=tuple(
                build(m.CreatableTopicConfig, name=k, value=v) for k, v in (configs or {}).items()
            ),
        )
        resp = await self.cluster.call(
            build(m.CreateTopicsRequest, topics=(topic,), timeout=_TIMEOUT, validate_only=False),
            CREATE_TOPICS.response(version),
        )
        (result,) = resp.topics
        raise_for(result.error_code, result.error_message)
        return getattr(result, "topic_id", None)

    async def delete_topic(self, name: str) -> None:
        """:raises TopicError: UNKNOWN_TOPIC_OR_PARTITION..."""
        await self.cluster.bootstrap()
        version = self.cluster.version(API_DELETE_TOPICS, 1, 6)
        m = DELETE_TOPICS.requests(version)
        if version >= 6:  # topics by name or id
            state = DELETE_TOPICS_V6.requests(version).DeleteTopicState
            topics = (build(state, name=name, topic_id=None),)
            req = build(m.DeleteTopicsRequest, topics=topics, timeout=_TIMEOUT)
        else:
            req = build(m.DeleteTopicsRequest, topic_names=(name,), timeout=_TIMEOUT)
        resp = await self.cluster.call(req, DELETE_TOPICS.response(version))
        (result,) = resp.responses
        self.cluster.forget(name)
        raise_for(result.error_code, getattr(result, "error_message", None))

    async def create_partitions(self, name: str, count: int) -> None:
        """Grow topic `name` to `count` partitions in all (Kafka never shrinks one).

        :raises TopicError: INVALID_PARTITIONS, UNKNOWN_TOPIC_OR_PARTITION...
        """
        await self.cluster.bootstrap()
        version = self.cluster.version(API_CREATE_PARTITIONS, 0, 3)
        m = CREATE_PARTITIONS.requests(version)
        topic = build(m.CreatePartitionsTopic, name=name, count=count, assignments=None)
        resp = await self.cluster.call(
            build(
                m.CreatePartitionsRequest, topics=(topic,), timeout=_TIMEOUT, validate_only=False
            ),
            CREATE_PARTITIONS.response(version),
        )
        (result,) = resp.results
        self.cluster.forget(name)  # the partition count changed: next lookup refreshes it
        raise_for(result.error_code, result.error_message)

    # -- ACLs (client/acls.py) -------------------------------------------------------------------

    async def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """:raises KafkaError: SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST"""
        await self.cluster.bootstrap()
        await acls.create_acls(self.cluster, bindings)

    async def describe_acls(self, f: AclBindingFilter | None = None) -> list[AclBinding]:
        await self.cluster.bootstrap()
        return await acls.describe_acls(self.cluster, f or AclBindingFilter())

    async def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        await self.cluster.bootstrap()
        return await acls.delete_acls(self.cluster, filters)

    async def list_topics(self) -> dict[str, TopicInfo]:
        await self.cluster.bootstrap()
        return {t.name: t for t in await self.cluster.metadata(None) if t.error_code == 0}

    async def describe_configs(
        self, resource_type: int, name: str, keys: tuple[str, ...] | None = None
    ) -> dict[str, str | None]:
        """The configs of a topic, broker or group (`keys=None`: all of them).

        :raises KafkaError: the resource or a key is unknown.
        """
        await self.cluster.bootstrap()
        version = self.cluster.version(API_DESCRIBE_CONFIGS, 1, 4)
        m = DESCRIBE_CONFIGS.requests(version)
        resource = build(
            m.DescribeConfigsResource,
            resource_type=resource_type,
            resource_name=name,
            configuration_keys=keys,
        )
        resp = await self.cluster.call(
            build(m.DescribeConfigsRequest, resources=(resource,)),
            DESCRIBE_CONFIGS.response(version),
        )
        (result,) = resp.results
        raise_for(result.error_code, result.error_message)
        return {c.name: c.value for c in result.configs}

    async def describe_config_entries(
        self, resource_type: int, name: str, keys: tuple[str, ...] | None = None
    ) -> list[ConfigEntry]:
        """Like `describe_configs`, with each config's source and whether it is read-only.

        :raises KafkaError: the resource or a key is unknown.
        """
        await self.cluster.bootstrap()
        version = self.cluster.version(API_DESCRIBE_CONFIGS, 1, 4)
        m = DESCRIBE_CONFIGS.requests(version)
        resource = build(
            m.DescribeConfigsResource,
            resource_type=resource_type,
            resource_name=name,
            configuration_keys=keys,
        )
        resp = await self.cluster.call(
            build(m.DescribeConfigsRequest, resources=(resource,)),
            DESCRIBE_CONFIGS.response(version),
        )
        (result,) = resp.results
        raise_for(result.error_code, result.error_message)
        return [
            ConfigEntry(c.name, c.value, _source(int(c.config_source)), bool(c.read_only))
            for c in result.configs
        ]

    async def incremental_alter_configs(
        self, resource_type: int, name: str, configs: Mapping[str, str | None]
    ) -> None:
        """Set each config to its value, or delete it (back to the default) when None.

        :raises KafkaError: INVALID_CONFIG (value out of the broker's bounds...) and others.
        """
        await self.cluster.bootstrap()
        version = self.cluster.version(API_INCREMENTAL_ALTER_CONFIGS, 0, 1)
        m = INCREMENTAL_ALTER_CONFIGS.requests(version)
        resource = build(
            m.AlterConfigsResource,
            resource_type=resource_type,
            resource_name=name,
            configs=tuple(
                build(
                    m.AlterableConfig,
                    name=k,
                    config_operation=_AlterOp.SET if v is not None else _AlterOp.DELETE,
                    value=v,
                )
                for k, v in configs.items()
            ),
        )
        resp = await self.cluster.call(
            build(m.IncrementalAlterConfigsRequest, resources=(resource,), validate_only=False),
            INCREMENTAL_ALTER_CONFIGS.response(version),
        )
        (result,) = resp.responses
        raise_for(result.error_code, result.error_message)

    async def list_offsets(
        self, topic: str, partition: int, spec: OffsetSpec, isolation_level: int = 0
    ) -> int:
        """The offset for "earliest", "latest", "max_timestamp" or a timestamp in ms
        (the first offset whose timestamp is at or after it; -1 when there is none);
        read_committed (`isolation_level=1`): "latest" is the last stable offset.

        :raises KafkaError: the partition is unknown or the broker refused.
        """
        await self.cluster.bootstrap()
        timestamp = _SPECS[spec] if isinstance(spec, str) else spec
        info = await self.cluster.topic(topic)
        if partition not in info.partitions:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"{topic} has no partition {partition}"
            )
        version = self.cluster.version(API_LIST_OFFSETS, 1, 9)
        m = LIST_OFFSETS.requests(version)
        req = build(
            m.ListOffsetsRequest,
            replica_id=-1,
            isolation_level=isolation_level,
            topics=(
                build(
                    m.ListOffsetsTopic,
                    name=topic,
                    partitions=(
                        build(
                            m.ListOffsetsPartition,
                            partition_index=partition,
                            current_leader_epoch=-1,
                            timestamp=timestamp,
                        ),
                    ),
                ),
            ),
        )
        resp = await self.cluster.call(
            req, LIST_OFFSETS.response(version), node_id=info.partitions[partition].leader_id
        )
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.none:
            raise error_for(p.error_code, f"ListOffsets {topic}-{partition}")
        return int(p.offset)

    async def delete_records(
        self, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """Delete every record below an offset of each (topic, partition) (-1: all of them, up
        to the high watermark); the new low watermark (log start) of each.

        :raises KafkaError: OFFSET_OUT_OF_RANGE (past the end), UNKNOWN_TOPIC_OR_PARTITION...
            for the first partition that failed; the others may have moved.
        """
        await self.cluster.bootstrap()
        by_leader: dict[int, dict[str, dict[int, int]]] = {}
        for (topic, partition), offset in offsets.items():
            info = await self.cluster.topic(topic)
            if partition not in info.partitions:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition, f"{topic} has no partition {partition}"
                )
            leader = info.partitions[partition].leader_id
            by_leader.setdefault(leader, {}).setdefault(topic, {})[partition] = offset
        version = self.cluster.version(API_DELETE_RECORDS, 0, 2)
        m = DELETE_RECORDS.requests(version)
        out: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            req = build(
                m.DeleteRecordsRequest,
                timeout=_TIMEOUT,
                topics=tuple(
                    build(
                        m.DeleteRecordsTopic,
                        name=t,
                        partitions=tuple(
                            build(m.DeleteRecordsPartition, partition_index=p, offset=o)
                            for p, o in ps.items()
                        ),
                    )
                    for t, ps in topics.items()
                ),
            )
            resp = await self.cluster.call(req, DELETE_RECORDS.response(version), node_id=leader)
            for t in resp.topics:
                for p in t.partitions:
                    raise_for(p.error_code, f"DeleteRecords {t.name}-{p.partition_index}")
                    out[(t.name, int(p.partition_index))] = int(p.low_watermark)
        return out

    # -- share groups (KIP-932 admin APIs) ------------------------------------------------------

    async def _coordinator(self, group_id: str) -> int:
        await self.cluster.bootstrap()
        return (await self.cluster.find_coordinator(group_id)).node_id

    async def _by_coordinator(self, group_ids: tuple[str, ...]) -> dict[int, tuple[str, ...]]:
        """The groups, by the node that coordinates each: a broker answers NOT_COORDINATOR
        for a group another node coordinates (`--processes N`, any Kafka cluster), so a
        request naming several groups goes to each coordinator with its own, as Kafka's
        AdminClient batches them (`CoordinatorStrategy`)."""
        nodes: dict[int, list[str]] = {}
        for g in dict.fromkeys(group_ids):
            nodes.setdefault(await self._coordinator(g), []).append(g)
        return {node: tuple(ids) for node, ids in nodes.items()}

    async def list_groups(
        self, types: Iterable[str] | None = None, states: Iterable[str] | None = None
    ) -> list[GroupListing]:
        """Groups of the given types ("share", "consumer"...) and states; None: all of them.

        Filters match case-insensitively; a broker older than ListGroups v5 (v4) is filtered
        here instead. Every broker is asked, as Kafka's AdminClient does (`listGroups`): each
        lists only the groups it coordinates.
        """
        await self.cluster.bootstrap()
        await self.cluster.metadata(())
        version = self.cluster.version(API_LIST_GROUPS, 0, 5)
        m = LIST_GROUPS.requests(version)
        type_filter = tuple(types or ())
        state_filter = tuple(states or ())
        listed: list[Any] = []  # each version's ListedGroup
        for node in self.cluster.node_ids or [self.cluster.any_node()]:
            resp = await self.cluster.call(
                build(m.ListGroupsRequest, states_filter=state_filter, types_filter=type_filter),
                LIST_GROUPS.response(version),
                node_id=node,
            )
            raise_for(resp.error_code, "ListGroups")
            listed += resp.groups
        wanted_types = {t.lower() for t in type_filter}
        wanted_states = {s.lower() for s in state_filter}
        out = []
        for g in listed:
            listing = GroupListing(
                group_id=g.group_id,
                group_type=getattr(g, "group_type", "") or g.protocol_type,
                state=getattr(g, "group_state", ""),
                protocol_type=g.protocol_type,
            )
            if wanted_types and listing.group_type.lower() not in wanted_types:
                continue
            if wanted_states and version >= 4 and listing.state.lower() not in wanted_states:
                continue
            out.append(listing)
        return sorted(out, key=lambda g: g.group_id)

    async def describe_share_groups(
        self, group_ids: Iterable[str]
    ) -> dict[str, ShareGroupDescription]:
        """State, epochs and members of share groups (ShareGroupDescribe v1).

        :raises KafkaError: GROUP_ID_NOT_FOUND (the message names the group) and others.
        """
        ids = tuple(group_ids)
        if not ids:
            return {}
        version = self.cluster.version(API_SHARE_GROUP_DESCRIBE, 1, 1)
        m = SHARE_GROUP_DESCRIBE.requests(version)
        described: list[Any] = []  # each version's DescribedGroup
        for node, on_node in (await self._by_coordinator(ids)).items():
            resp = await self.cluster.call(
                build(
                    m.ShareGroupDescribeRequest,
                    group_ids=on_node,
                    include_authorized_operations=False,
                ),
                SHARE_GROUP_DESCRIBE.response(version),
                node_id=node,
            )
            described += resp.groups
        out: dict[str, ShareGroupDescription] = {}
        for g in described:
            raise_for(g.error_code, g.error_message or f"share group {g.group_id}")
            out[g.group_id] = ShareGroupDescription(
                group_id=g.group_id,
                state=g.group_state,
                group_epoch=int(g.group_epoch),
                assignment_epoch=int(g.assignment_epoch),
                assignor=g.assignor_name,
                members=[_member(x) for x in g.members],
            )
        return out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        """Delete groups (share groups must be empty); each group's error, or None."""
        ids = tuple(group_ids)
        if not ids:
            return {}
        version = self.cluster.version(API_DELETE_GROUPS, 0, 2)
        m = DELETE_GROUPS.requests(version)
        results: list[Any] = []  # each version's DeletableGroupResult
        for node, on_node in (await self._by_coordinator(ids)).items():
            resp = await self.cluster.call(
                build(m.DeleteGroupsRequest, groups_names=on_node),
                DELETE_GROUPS.response(version),
                node_id=node,
            )
            results += resp.results
        return {
            r.group_id: None
            if r.error_code == ErrorCode.none
            else error_for(r.error_code, f"group {r.group_id}")
            for r in results
        }

    # -- consumer groups: description (client/group_describe.py), committed offsets -------------

    async def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription | None:
        """Coordinator, state, assignor and members of a KIP-848 or classic consumer group;
        None when its coordinator knows no such group (it may still have committed offsets)."""
        return await group_describe.describe(self.cluster, group_id)

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], CommittedOffset]:
        """Committed offsets (-1: none) of the partitions; None: all the group committed."""
        node = await self._coordinator(group_id)
        return await group_offsets.list_offsets(self.cluster, node, group_id, partitions)

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """Commit offsets for a group without members; each partition's error, or None."""
        node = await self._coordinator(group_id)
        return await group_offsets.alter_offsets(self.cluster, node, group_id, offsets)

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], KafkaError | None]:
        """:raises KafkaError: GROUP_ID_NOT_FOUND; else each partition's error, or None."""
        node = await self._coordinator(group_id)
        return await group_offsets.delete_offsets(self.cluster, node, group_id, partitions)

    async def describe_share_group_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], SharePartitionOffsets]:
        """SPSO and lag of a share group's partitions (all it has started, when None).

        A partition the group never started has start offset -1 and lag -1.
        :raises KafkaError: GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION...
        """
        node = await self._coordinator(group_id)
        version = self.cluster.version(API_DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1)
        m = DESCRIBE_SHARE_GROUP_OFFSETS.requests(version)
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            topics = tuple(
                build(m.DescribeShareGroupOffsetsRequestTopic, topic_name=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            )
        group = build(m.DescribeShareGroupOffsetsRequestGroup, group_id=group_id, topics=topics)
        resp = await self.cluster.call(
            build(m.DescribeShareGroupOffsetsRequest, groups=(group,)),
            DESCRIBE_SHARE_GROUP_OFFSETS.response(version),
            node_id=node,
        )
        (g,) = resp.groups
        raise_for(g.error_code, g.error_message or f"share group {group_id}")
        out: dict[tuple[str, int], SharePartitionOffsets] = {}
        for t in g.topics:
            for part in t.partitions:
                name = f"{t.topic_name}-{part.partition_index}"
                raise_for(part.error_code, part.error_message or name)
                out[(t.topic_name, int(part.partition_index))] = SharePartitionOffsets.parse(
                    t.topic_name, part
                )
        return out

    async def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[tuple[str, int], int]
    ) -> None:
        """Set the share-partition start offsets of an empty share group (made if unknown).

        :raises KafkaError: NON_EMPTY_GROUP (the group has members), UNKNOWN_TOPIC_OR_PARTITION.
        """
        node = await self._coordinator(group_id)
        version = self.cluster.version(API_ALTER_SHARE_GROUP_OFFSETS, 0, 0)
        m = ALTER_SHARE_GROUP_OFFSETS.requests(version)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, p), offset in offsets.items():
            by_topic.setdefault(topic, []).append((p, offset))
        topics = tuple(
            build(
                m.AlterShareGroupOffsetsRequestTopic,
                topic_name=t,
                partitions=tuple(
                    build(
                        m.AlterShareGroupOffsetsRequestPartition, partition_index=p, start_offset=o
                    )
                    for p, o in ps
                ),
            )
            for t, ps in by_topic.items()
        )
        resp = await self.cluster.call(
            build(m.AlterShareGroupOffsetsRequest, group_id=group_id, topics=topics),
            ALTER_SHARE_GROUP_OFFSETS.response(version),
            node_id=node,
        )
        raise_for(resp.error_code, resp.error_message or f"share group {group_id}")
        for t in resp.responses:
            for part in t.partitions:
                name = f"{t.topic_name}-{part.partition_index}"
                raise_for(part.error_code, part.error_message or name)

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> None:
        """Forget an empty share group's offsets on topics; they start afresh next time.

        :raises KafkaError: NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION.
        """
        node = await self._coordinator(group_id)
        version = self.cluster.version(API_DELETE_SHARE_GROUP_OFFSETS, 0, 0)
        m = DELETE_SHARE_GROUP_OFFSETS.requests(version)
        req = build(
            m.DeleteShareGroupOffsetsRequest,
            group_id=group_id,
            topics=tuple(
                build(m.DeleteShareGroupOffsetsRequestTopic, topic_name=t) for t in topics
            ),
        )
        resp = await self.cluster.call(
            req, DELETE_SHARE_GROUP_OFFSETS.response(version), node_id=node
        )
        raise_for(resp.error_code, resp.error_message or f"share group {group_id}")
        for t in resp.responses:
            raise_for(t.error_code, t.error_message or t.topic_name)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    group_type: str
    state: str
    protocol_type: str


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscribed: tuple[str, ...]
    assignment: dict[str, tuple[int, ...]]  # topic name -> partitions


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SharePartitionOffsets:
    """A share-partition's start offset (SPSO) and lag; -1 when the group never started it.

    Shoal's broker adds SPEO and in-flight counts by state; from another broker they are None.
    """

    topic: str
    partition: int
    start_offset: int
    lag: int
    end_offset: int | None = None
    available: int | None = None
    acquired: int | None = None
    acknowledged: int | None = None
    archived: int | None = None
    control: int | None = None  # offsets of share-state and marker records, not user records
    archiving: int | None = None  # waiting for their copy to the dead-letter topic
    delayed: int | None = None  # of `available`, waiting (retry backoff, scheduled delivery)

    @classmethod
    def parse(cls, topic: str, p: Any) -> SharePartitionOffsets:
        extra: dict[str, int] = {}
        for word in (p.error_message or "").split():
            key, sep, value = word.partition("=")
            if sep and value.lstrip("-").isdigit():
                extra[key] = int(value)
        return cls(
            topic,
            int(p.partition_index),
            int(p.start_offset),
            int(getattr(p, "lag", -1)),
            end_offset=extra.get("speo"),
            available=extra.get("available"),
            acquired=extra.get("acquired"),
            acknowledged=extra.get("acknowledged"),
            archived=extra.get("archived"),
            control=extra.get("control"),
            archiving=extra.get("archiving"),
            delayed=extra.get("delayed"),
        )


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


def _member(m: Any) -> ShareMemberDescription:
    return ShareMemberDescription(
        member_id=m.member_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rack_id=m.rack_id,
        member_epoch=int(m.member_epoch),
        subscribed=tuple(m.subscribed_topic_names),
        assignment={
            t.topic_name: tuple(int(p) for p in t.partitions) for t in m.assignment.topic_partitions
        },
    )
