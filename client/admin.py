"""An asyncio admin client: topics, configs (GROUP configs too: resource type 32), offsets."""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Literal

from kio.schema.errors import ErrorCode

from client.cluster import API_CREATE_TOPICS
from client.cluster import API_DELETE_TOPICS
from client.cluster import API_DESCRIBE_CONFIGS
from client.cluster import API_INCREMENTAL_ALTER_CONFIGS
from client.cluster import API_LIST_OFFSETS
from client.cluster import Cluster
from client.cluster import TopicInfo
from client.cluster import schema
from client.errors import KafkaError
from client.errors import error_for
from client.errors import raise_for
from protocol.messages import build

_TIMEOUT = datetime.timedelta(seconds=30)


class ConfigResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    GROUP = 32


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
    def __init__(self, bootstrap: str, *, client_id: str = "shoal-admin") -> None:
        self.cluster = Cluster(bootstrap, client_id=client_id)

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
        m = schema("create_topics", self.cluster.version(API_CREATE_TOPICS, 2, 7))
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
        resp = await self.cluster.request(
            build(m.CreateTopicsRequest, topics=(topic,), timeout=_TIMEOUT, validate_only=False)
        )
        (result,) = resp.topics
        raise_for(result.error_code, result.error_message)
        return getattr(result, "topic_id", None)

    async def delete_topic(self, name: str) -> None:
        """:raises TopicError: UNKNOWN_TOPIC_OR_PARTITION..."""
        await self.cluster.bootstrap()
        version = self.cluster.version(API_DELETE_TOPICS, 1, 6)
        m = schema("delete_topics", version)
        if version >= 6:
            req = build(
                m.DeleteTopicsRequest,
                topics=(build(m.DeleteTopicState, name=name, topic_id=None),),
                timeout=_TIMEOUT,
            )
        else:
            req = build(m.DeleteTopicsRequest, topic_names=(name,), timeout=_TIMEOUT)
        resp = await self.cluster.request(req)
        (result,) = resp.responses
        self.cluster.forget(name)
        raise_for(result.error_code, getattr(result, "error_message", None))

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
        m = schema("describe_configs", self.cluster.version(API_DESCRIBE_CONFIGS, 1, 4))
        resource = build(
            m.DescribeConfigsResource,
            resource_type=resource_type,
            resource_name=name,
            configuration_keys=keys,
        )
        resp = await self.cluster.request(build(m.DescribeConfigsRequest, resources=(resource,)))
        (result,) = resp.results
        raise_for(result.error_code, result.error_message)
        return {c.name: c.value for c in result.configs}

    async def incremental_alter_configs(
        self, resource_type: int, name: str, configs: Mapping[str, str | None]
    ) -> None:
        """Set each config to its value, or delete it (back to the default) when None.

        :raises KafkaError: INVALID_CONFIG (value out of the broker's bounds...) and others.
        """
        await self.cluster.bootstrap()
        version = self.cluster.version(API_INCREMENTAL_ALTER_CONFIGS, 0, 1)
        m = schema("incremental_alter_configs", version)
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
        resp = await self.cluster.request(
            build(m.IncrementalAlterConfigsRequest, resources=(resource,), validate_only=False)
        )
        (result,) = resp.responses
        raise_for(result.error_code, result.error_message)

    async def list_offsets(self, topic: str, partition: int, spec: OffsetSpec) -> int:
        """The offset for "earliest", "latest", "max_timestamp" or a timestamp in ms
        (the first offset whose timestamp is at or after it; -1 when there is none).

        :raises KafkaError: the partition is unknown or the broker refused.
        """
        await self.cluster.bootstrap()
        timestamp = _SPECS[spec] if isinstance(spec, str) else spec
        info = await self.cluster.topic(topic)
        if partition not in info.partitions:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"{topic} has no partition {partition}"
            )
        m = schema("list_offsets", self.cluster.version(API_LIST_OFFSETS, 1, 9))
        req = build(
            m.ListOffsetsRequest,
            replica_id=-1,
            isolation_level=0,
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
        resp = await self.cluster.request(req, node_id=info.partitions[partition].leader_id)
        p = resp.topics[0].partitions[0]
        if p.error_code != ErrorCode.none:
            raise error_for(p.error_code, f"ListOffsets {topic}-{partition}")
        return int(p.offset)
