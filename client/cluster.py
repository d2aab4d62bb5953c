"""What every client needs from the cluster: API versions, brokers, topics, coordinators, sockets.

One `Connection` per (broker node, channel). A channel lets a slow request (a long-polling
ShareFetch) stay off the socket that carries heartbeats: Kafka answers in request order per
connection, so sharing one would delay the heartbeat behind the fetch.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse as FindCoordinatorV4
from kio.schema.find_coordinator.v5.response import FindCoordinatorResponse as FindCoordinatorV5
from kio.schema.find_coordinator.v6.response import FindCoordinatorResponse as FindCoordinatorV6
from kio.schema.metadata.v9.response import MetadataResponseTopic as MetadataV9Topic  # no ids
from kio.static.protocol import RequestPayload

from client.connection import Connection
from client.errors import CoordinatorError
from client.errors import KafkaError
from client.errors import TopicError
from client.errors import UnsupportedVersionError
from client.errors import error_for
from client.kio_apis import API_VERSIONS
from client.kio_apis import FIND_COORDINATOR
from client.kio_apis import METADATA
from client.security import Security
from protocol import api_keys
from protocol.messages import build

if TYPE_CHECKING:
    from client.kio_apis import ApiVersionsResponse

API_PRODUCE = api_keys.PRODUCE
API_LIST_OFFSETS = api_keys.LIST_OFFSETS
API_METADATA = api_keys.METADATA
API_FIND_COORDINATOR = api_keys.FIND_COORDINATOR
API_CREATE_TOPICS = api_keys.CREATE_TOPICS
API_DELETE_TOPICS = api_keys.DELETE_TOPICS
API_DESCRIBE_CONFIGS = api_keys.DESCRIBE_CONFIGS
API_INCREMENTAL_ALTER_CONFIGS = api_keys.INCREMENTAL_ALTER_CONFIGS
API_SHARE_GROUP_HEARTBEAT = api_keys.SHARE_GROUP_HEARTBEAT
API_SHARE_FETCH = api_keys.SHARE_FETCH
API_SHARE_ACKNOWLEDGE = api_keys.SHARE_ACKNOWLEDGE

BOOTSTRAP_NODE = -1  # Kafka clients give bootstrap addresses negative ids too
DEFAULT_CHANNEL = "default"
ZERO_UUID = uuid.UUID(int=0)
_METADATA_RETRIES = 20
_METADATA_BACKOFF_S = 0.05
_MISSING = (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id)
# FindCoordinator v4 on batches keys: one answer per key.
COORDINATOR_KEYS = (FindCoordinatorV4, FindCoordinatorV5, FindCoordinatorV6)
R = TypeVar("R")


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """`"host:port,host2:port2"` as (host, port) pairs."""
    out: list[tuple[str, int]] = []
    for item in bootstrap.split(","):
        item = item.strip().removeprefix("PLAINTEXT://")
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap address {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap address given")
    return out


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader_id: int
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionInfo]
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


class Cluster:
    """Cluster view and connection pool shared by the producer, admin and share consumer."""

    def __init__(self, bootstrap: str, *, client_id: str, security: Security | None = None) -> None:
        self.client_id = client_id
        self.security = security  # TLS and SASL for every connection (None: PLAINTEXT)
        self._bootstrap = parse_bootstrap(bootstrap)
        self._nodes: dict[int, BrokerNode] = {}
        self._api_versions: dict[int, tuple[int, int]] = {}
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self._conns: dict[tuple[int, str], Connection] = {}
        self._conn_locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._bootstrap_lock = asyncio.Lock()
        self._bootstrapped = False
        self._bootstrap_index = 0
        self._last_errors: dict[str, KafkaError] = {}

    # -- versions -----------------------------------------------------------------------------

    async def bootstrap(self) -> None:
        """ApiVersions and a first Metadata (brokers only); idempotent."""
        async with self._bootstrap_lock:
            if self._bootstrapped:
                return
            resp = await self._api_versions_from_any_bootstrap()
            if resp.error_code != ErrorCode.none:
                raise error_for(resp.error_code, "ApiVersions")
            self._api_versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
            }
            self._bootstrapped = True
        await self.metadata(())

    async def _api_versions_from_any_bootstrap(self) -> ApiVersionsResponse:
        """ApiVersions from the first bootstrap address that answers, in the order given."""
        req = API_VERSIONS.requests(3).ApiVersionsRequest(
            client_software_name="shoal-client", client_software_version="0.1.0"
        )
        last: OSError | None = None
        for i in range(len(self._bootstrap)):
            self._bootstrap_index = i
            try:
                return await self.call(req, API_VERSIONS.response(3), node_id=BOOTSTRAP_NODE)
            except OSError as e:  # refused, unreachable, closed: try the next address
                last = e
        assert last is not None
        raise last

    def version(self, api_key: int, lo: int, hi: int) -> int:
        """The highest version both sides speak within [lo, hi].

        :raises UnsupportedVersionError: the broker offers none of them.
        """
        if api_key not in self._api_versions:
            raise UnsupportedVersionError(f"broker does not offer api key {api_key}")
        bmin, bmax = self._api_versions[api_key]
        best = min(bmax, hi)
        if best < max(bmin, lo):
            raise UnsupportedVersionError(
                f"api key {api_key}: broker offers v{bmin}-{bmax}, client speaks v{lo}-{hi}"
            )
        return best

    def supports(self, api_key: int, version: int) -> bool:
        bounds = self._api_versions.get(api_key)
        return bounds is not None and bounds[0] <= version <= bounds[1]

    # -- connections --------------------------------------------------------------------------

    async def connection(self, node_id: int, channel: str = DEFAULT_CHANNEL) -> Connection:
        """The live connection to a node, opened (again) when missing or closed."""
        key = (node_id, channel)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        lock = self._conn_locks.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self._conns.get(key)
            if conn is None or conn.closed:
                if conn is not None:  # failed (the broker went away): its socket closed too
                    await conn.close()
                host, port = self._address(node_id)
                conn = await Connection.open(host, port, self.client_id, self.security)
                self._conns[key] = conn
            return conn

    def _address(self, node_id: int) -> tuple[str, int]:
        if node_id == BOOTSTRAP_NODE:
            return self._bootstrap[self._bootstrap_index]
        node = self._nodes.get(node_id)
        if node is None:
            raise KafkaError(ErrorCode.broker_not_available, f"unknown broker node {node_id}")
        return node.host, node.port

    @property
    def node_ids(self) -> list[int]:
        """The brokers the last Metadata named."""
        return sorted(self._nodes)

    def any_node(self) -> int:
        """A node for requests any broker can answer (metadata, admin)."""
        return min(self._nodes) if self._nodes else BOOTSTRAP_NODE

    async def request(
        self,
        body: RequestPayload,
        *,
        node_id: int | None = None,
        channel: str = DEFAULT_CHANNEL,
        expect_response: bool = True,
    ) -> Any:
        conn = await self.connection(self.any_node() if node_id is None else node_id, channel)
        return await conn.request(body, expect_response=expect_response)

    async def call(
        self,
        body: RequestPayload,
        response: type[R],
        *,
        node_id: int | None = None,
        channel: str = DEFAULT_CHANNEL,
    ) -> R:
        """`request`, its answer typed: `response` is kio's class of the request's version
        (`client.kio_apis`)."""
        resp = await self.request(body, node_id=node_id, channel=channel)
        if not isinstance(resp, response):  # the connection decodes by the request's version
            raise TypeError(f"{type(resp).__name__} is not {response.__name__}")
        return resp

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    # -- metadata -----------------------------------------------------------------------------

    async def metadata(
        self,
        names: tuple[str, ...] | None = None,
        *,
        topic_ids: tuple[uuid.UUID, ...] = (),
        auto_create: bool = False,
    ) -> list[TopicInfo]:
        """Metadata v12 for topics by name and/or id (`names=None` and no ids: every topic).

        Updates the broker list and the topic caches; per-topic errors are left in the result.
        """
        version = self.version(API_METADATA, 9, 12)
        m = METADATA.requests(version)
        topics: tuple[Any, ...] | None
        if names is None and not topic_ids:
            topics = None
        else:
            topics = tuple(
                build(m.MetadataRequestTopic, topic_id=ZERO_UUID, name=n) for n in names or ()
            ) + tuple(build(m.MetadataRequestTopic, topic_id=t, name=None) for t in topic_ids)
        req = build(
            m.MetadataRequest,
            topics=topics,
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
        resp = await self.call(req, METADATA.response(version))
        for b in resp.brokers:
            self._nodes[int(b.node_id)] = BrokerNode(int(b.node_id), b.host, int(b.port))
        out: list[TopicInfo] = []
        for t in resp.topics:
            info = TopicInfo(
                name=t.name or "",
                topic_id=ZERO_UUID if isinstance(t, MetadataV9Topic) else t.topic_id or ZERO_UUID,
                partitions={
                    int(p.partition_index): PartitionInfo(
                        int(p.partition_index), int(p.leader_id), p.error_code
                    )
                    for p in t.partitions
                },
                error_code=t.error_code,
            )
            if t.error_code == ErrorCode.none:
                self._remember(info)
            out.append(info)
        return out

    def _remember(self, info: TopicInfo) -> None:
        old = self._by_name.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            self._by_id.pop(old.topic_id, None)  # the topic was deleted and made again
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def forget(self, topic: str | uuid.UUID) -> None:
        """Drop a cached topic so the next lookup asks the broker (leader moved, topic gone)."""
        info = self._by_id.get(topic) if isinstance(topic, uuid.UUID) else self._by_name.get(topic)
        if info is not None:
            self._by_name.pop(info.name, None)
            self._by_id.pop(info.topic_id, None)

    def cached_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    async def topic(self, name: str, *, auto_create: bool = False) -> TopicInfo:
        """A topic with a leader for every partition, from the cache or the broker.

        :raises TopicError: the topic does not exist (and was not auto-created).
        """
        cached = self._by_name.get(name)
        if cached is not None:
            return cached
        for _ in range(_METADATA_RETRIES):
            (info,) = await self._lookup(names=(name,), auto_create=auto_create)
            if info is not None:
                return info
            await asyncio.sleep(_METADATA_BACKOFF_S)
        raise self._error_for(name)

    async def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo:
        """:raises TopicError: no topic has this id."""
        cached = self._by_id.get(topic_id)
        if cached is not None:
            return cached
        for _ in range(_METADATA_RETRIES):
            (info,) = await self._lookup(topic_ids=(topic_id,))
            if info is not None:
                return info
            await asyncio.sleep(_METADATA_BACKOFF_S)
        raise self._error_for(str(topic_id))

    async def _lookup(
        self,
        names: tuple[str, ...] = (),
        topic_ids: tuple[uuid.UUID, ...] = (),
        auto_create: bool = False,
    ) -> list[TopicInfo | None]:
        """One Metadata round: each asked topic if usable, None to retry.

        :raises TopicError: a topic does not exist and will not be created.
        """
        found = await self.metadata(names, topic_ids=topic_ids, auto_create=auto_create)
        self._last_errors = {}
        usable: dict[str, TopicInfo] = {}
        for t in found:
            keys = (t.name, str(t.topic_id))
            if t.error_code != ErrorCode.none:
                for k in keys:
                    self._last_errors[k] = TopicError(t.error_code, t.error_message)
                if not auto_create and t.error_code in _MISSING:
                    raise TopicError(t.error_code, t.error_message or f"unknown topic {keys}")
            elif t.partitions and all(p.leader_id >= 0 for p in t.partitions.values()):
                usable.update(dict.fromkeys(keys, t))
        return [usable.get(k) for k in (*names, *(str(t) for t in topic_ids))]

    def _error_for(self, key: str) -> KafkaError:
        return self._last_errors.get(
            key, TopicError(ErrorCode.leader_not_available, f"topic {key} has no leader")
        )

    async def find_coordinator(
        self, group_id: str, key_type: int = 0, *, channel: str = DEFAULT_CHANNEL
    ) -> BrokerNode:
        """FindCoordinator (v4+ batches keys; older versions take one key).

        :raises CoordinatorError: the broker knows no coordinator for the group.
        """
        version = self.version(API_FIND_COORDINATOR, 1, 6)
        m = FIND_COORDINATOR.requests(version)
        req = build(
            m.FindCoordinatorRequest, key=group_id, key_type=key_type, coordinator_keys=(group_id,)
        )
        resp = await self.call(req, FIND_COORDINATOR.response(version), channel=channel)
        c = resp.coordinators[0] if isinstance(resp, COORDINATOR_KEYS) else resp
        if c.error_code != ErrorCode.none:
            raise CoordinatorError(c.error_code, c.error_message)
        node = BrokerNode(int(c.node_id), c.host, int(c.port))
        self._nodes[node.node_id] = node
        return node
