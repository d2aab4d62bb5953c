"""What a handler can reach: the broker's services and the request's own header."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import NamedTuple

from broker.ack_slices import AckSlices
from broker.clock import Clock
from broker.clock import WallClock
from broker.config import BrokerConfig
from broker.group_commit import GroupCommit
from broker.group_config_saves import GroupConfigSaves
from broker.metrics import BrokerMetrics
from broker.notifier import Notifier
from broker.principal import ANONYMOUS
from broker.producer_ids import ProducerIdAllocator
from broker.registry import Handler
from broker.registry import Registry
from broker.to_the_end import Changes
from broker.topic_admin import TopicAdmin
from protocol.messages import RequestHeader

if TYPE_CHECKING:
    from broker.acl_cache import AclCache
    from broker.acl_manager import AclManager
    from broker.classic_groups import ClassicGroupService
    from broker.dynamic_config import DynamicBrokerConfigs
    from broker.node_link import NodeLinks
    from broker.record_deletion import RecordDeletion
    from broker.sasl.session import SaslSession
    from broker.share.share_fetch_service import ShareFetchService
    from broker.share.share_partition_manager import SharePartitionManager
    from broker.share.txn_acks import TxnShareAcks
    from broker.transactions import RemoteMarkers
    from coordinator.consumer_group import ConsumerGroupCoordinator
    from coordinator.group_configs import GroupConfigs
    from coordinator.group_registry import GroupRegistry
    from coordinator.offset_store import OffsetStore
    from coordinator.share_group import ShareGroupCoordinator
    from coordinator.share_group_admin import ShareGroupAdmin
    from coordinator.share_group_records import ShareGroupRecords
    from coordinator.transaction_coordinator import TransactionCoordinator
    from storage.log_manager import LogManager
    from storage.scram_credentials import ScramCredentialStore


@dataclass
class BrokerServices:
    """Shared, long-lived state, grouped by what owns it; no logic of its own."""

    logs: LogManager
    registry: Registry[RequestContext]
    producer_ids: ProducerIdAllocator
    cluster_id: str
    node_id: int
    host: str
    port: int
    group_configs: GroupConfigs
    coordinator: ShareGroupCoordinator
    # The share groups known beside those in memory (`coordinator.share_group_records`).
    share_groups: ShareGroupRecords
    share_group_admin: ShareGroupAdmin
    classic_groups: ClassicGroupService  # classic consumer groups (JoinGroup, SyncGroup...)
    consumer_groups: ConsumerGroupCoordinator  # KIP-848 consumer groups
    groups: GroupRegistry  # which kind of group (share, classic, consumer) owns a group id
    share_partitions: SharePartitionManager
    share_fetch: ShareFetchService
    dynamic_configs: DynamicBrokerConfigs
    record_deletion: RecordDeletion
    credentials: ScramCredentialStore
    offsets: OffsetStore  # consumer groups' committed offsets
    transactions: TransactionCoordinator  # transactional ids, their state and markers
    group_commit: GroupCommit  # fsyncs produce requests need, one batch per loop tick
    # The changes this server's requests began that run to their end; stop() waits for them.
    changes: Changes
    # Group configs written off the loop, one write at a time.
    group_config_saves: GroupConfigSaves
    topic_admin: TopicAdmin  # topics made and removed
    # One credential change at a time: each is applied, written, or rolled back whole.
    credentials_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Listener name -> the (host, port) Metadata gives its clients; filled in when bound.
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)
    notifier: Notifier = field(default_factory=Notifier)
    # Acknowledgements of a share-partition wait while a big one of it is applied in steps.
    ack_slices: AckSlices = field(default_factory=AckSlices)
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    clock: Clock = field(default_factory=WallClock)
    # None when `authorizer.class.name` is empty: every request is allowed.
    acls: AclManager | None = None
    # Share acknowledgements staged in transactions (Shoal's TxnShareAcknowledge); None: off.
    txn_share_acks: TxnShareAcks | None = None
    # `--processes N` (N > 1): connections to the other processes, and the markers of this
    # process's transactions that they lead (None with N = 1: nothing is remote).
    node_links: NodeLinks | None = None
    txn_remote: RemoteMarkers | None = None

    @property
    def config(self) -> BrokerConfig:
        """The settings in force: the dynamic `group.share.*` configs can replace them."""
        return self.dynamic_configs.current

    def now_ms(self) -> int:
        return self.clock.now_ms()


class RequestContext(NamedTuple):
    """One request's header and its connection's state (built per request: a NamedTuple, as
    a frozen dataclass's __init__ costs twice as much)."""

    services: BrokerServices
    header: RequestHeader
    peer: str
    principal: str = ANONYMOUS  # set by authentication (broker.principal)
    acl_cache: AclCache | None = None  # the connection's authorization decisions
    listener: str = ""  # the name of the listener the client connected to
    sasl: SaslSession | None = None  # the connection's SASL state, on a SASL listener

    @property
    def host(self) -> str:
        """The client's address without its port, as ACL hosts name it."""
        return self.peer.rpartition(":")[0] or self.peer

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def endpoint(self) -> tuple[str, int]:
        """The advertised (host, port) of the listener this request came in on."""
        s = self.services
        return s.endpoints.get(self.listener, (s.host, s.port))


# The broker's handlers: each takes a RequestContext (the registry is generic in it).
RequestHandler = Handler[RequestContext]
